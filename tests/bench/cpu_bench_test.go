package bench

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// cpuSampler records, every second, the CPU time (user + system) every process on the machine has used,
// summed by command name, so a benchmark can say where the CPU went in a window of its run. A process
// that exits inside a window takes its share with it.
type cpuSampler struct {
	mu      sync.Mutex
	samples []cpuSample
	stop    chan struct{}
	done    chan struct{}
}

type cpuSample struct {
	at    time.Time
	cpu   map[string]float64 // seconds, by command name
	steal machineTicks       // the machine's ticks, from /proc/stat
}

// machineTicks are /proc/stat's counters for all CPUs: every tick, and those the hypervisor gave to
// another guest while this one wanted to run.
type machineTicks struct{ total, steal float64 }

// clockTicks is USER_HZ, 100 on every Linux this runs on.
const clockTicks = 100

func startCPUSampler() *cpuSampler {
	s := &cpuSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			smp := cpuSample{at: time.Now(), cpu: readCPU(), steal: readSteal()}
			s.mu.Lock()
			s.samples = append(s.samples, smp)
			s.mu.Unlock()
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

func (s *cpuSampler) close() {
	close(s.stop)
	<-s.done
}

// readCPU sums utime and stime of /proc/<pid>/stat by command name.
func readCPU() map[string]float64 {
	out := map[string]float64{}
	paths, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		s := string(b)
		open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || closing < open {
			continue
		}
		f := strings.Fields(s[closing+1:])
		if len(f) < 13 {
			continue
		}
		u, _ := strconv.ParseFloat(f[11], 64)
		sys, _ := strconv.ParseFloat(f[12], 64)
		out[s[open+1:closing]] += (u + sys) / clockTicks
	}
	return out
}

// readSteal reads the first line of /proc/stat ("cpu user nice system idle iowait irq softirq steal
// guest …"); guest time is inside user already, so the total stops at steal.
func readSteal() machineTicks {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return machineTicks{}
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return machineTicks{}
	}
	var m machineTicks
	for _, v := range f[1:9] {
		x, _ := strconv.ParseFloat(v, 64)
		m.total += x
		m.steal = x // the last, f[8], is steal
	}
	return m
}

// machineSpeed runs deploy/local/scripts/speed.sh (make test prints the same figure): the seconds of a
// fixed one-core workload. The same code's CPU figures scale with it, so runs on cores slower that day
// (another guest on the host, a lower clock) are told apart from runs of slower code; 0 if it failed.
func machineSpeed(repoRoot string) float64 {
	out, err := exec.Command("bash", filepath.Join(repoRoot, "deploy", "local", "scripts", "speed.sh")).Output()
	if err != nil {
		return 0
	}
	f := strings.Fields(string(out))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// window returns the CPU seconds each command used between from and to (the nearest samples), and the
// window's length; the commands are ordered by use, largest first, with at most top named.
func (s *cpuSampler) window(from, to time.Time, top int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	nearest := func(t time.Time) *cpuSample {
		var best *cpuSample
		for i := range s.samples {
			if best == nil || absDur(s.samples[i].at.Sub(t)) < absDur(best.at.Sub(t)) {
				best = &s.samples[i]
			}
		}
		return best
	}
	a, b := nearest(from), nearest(to)
	if a == nil || b == nil || !b.at.After(a.at) {
		return "no samples"
	}
	type use struct {
		name string
		sec  float64
	}
	var uses []use
	total := 0.0
	for name, v := range b.cpu {
		if d := v - a.cpu[name]; d > 0 {
			uses = append(uses, use{name, d})
			total += d
		}
	}
	sort.Slice(uses, func(i, j int) bool { return uses[i].sec > uses[j].sec })
	span := b.at.Sub(a.at).Seconds()
	parts := []string{fmt.Sprintf("%.0f CPU s in %.0f s (%.2f cores", total, span, total/span)}
	if dt := b.steal.total - a.steal.total; dt > 0 {
		parts[0] += fmt.Sprintf("; %.1f %% stolen by the hypervisor", 100*(b.steal.steal-a.steal.steal)/dt)
	}
	parts[0] += ")"
	for i, u := range uses {
		if i == top {
			break
		}
		parts = append(parts, fmt.Sprintf("%s %.0f", u.name, u.sec))
	}
	return strings.Join(parts, ", ")
}

func absDur(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}
