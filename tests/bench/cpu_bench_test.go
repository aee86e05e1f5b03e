package bench

import (
	"fmt"
	"os"
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
	at  time.Time
	cpu map[string]float64 // seconds, by command name
}

// clockTicks is USER_HZ, 100 on every Linux this runs on.
const clockTicks = 100

func startCPUSampler() *cpuSampler {
	s := &cpuSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			smp := cpuSample{at: time.Now(), cpu: readCPU()}
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
	parts := []string{fmt.Sprintf("%.0f CPU s in %.0f s (%.2f cores)", total, span, total/span)}
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
