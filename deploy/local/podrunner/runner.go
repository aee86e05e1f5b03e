// Package podrunner runs the pods that Kubernetes schedules to a marked node of the local stack as
// processes of this machine. kwok runs no containers; for the kwok node this runner is given, it plays the
// kubelet: it materialises the pod's ConfigMap, Secret, downward-API, projected and emptyDir volumes in
// its state directory, runs the init containers in order and then the containers, each as a process in a
// mount namespace of its own where every volume is bind-mounted at its mount path, and reports the pod's
// status (phases, container states, restarts, readiness from the pod's own probes) to the API server.
//
// What it does not do: images (a pod's image is replaced by this machine's Debian packages, with the
// console scripts their entry points declare, see BuildHostImage), networking (every pod shares the
// machine's network, as with hostNetwork: true; its pod IP is the runner's HostIP), resource limits,
// liveness and startup probes, and live updates of mounted ConfigMaps and Secrets (a changed input rolls
// the pod instead, which is how stackflow's workflows change configuration).
package podrunner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"

	"github.com/stackflow/stackflow/deploy/local/procfs"
)

// Config configures a Runner.
type Config struct {
	Kube kubernetes.Interface
	// Node is the node whose pods the runner runs.
	Node string
	// Dir holds the runner's state: per pod its volumes, process specs and PID files.
	Dir string
	// LogDir receives one log per container: <namespace>_<pod>_<container>.log.
	LogDir string
	// ImageBin holds the host image's console scripts; it ends every container's PATH.
	ImageBin string
	// HostIP is the address pods report as pod and host IP: they share the machine's network.
	HostIP string
	// Self is the runner's own binary, re-executed as ExecSubcommand to start each container.
	Self string
	// StopGrace caps the termination grace period of pods (default 10s).
	StopGrace time.Duration
	Log       *slog.Logger
}

// Runner plays the kubelet of one node.
type Runner struct {
	cfg  Config
	mu   sync.Mutex
	pods map[types.UID]*podRun
}

// New returns a runner; Run starts it.
func New(cfg Config) *Runner {
	if cfg.StopGrace == 0 {
		cfg.StopGrace = 10 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Runner{cfg: cfg, pods: map[types.UID]*podRun{}}
}

// Run serves the node's pods until ctx ends, then stops every container it started.
func (r *Runner) Run(ctx context.Context) error {
	if err := os.MkdirAll(filepath.Join(r.cfg.Dir, "pods"), 0o700); err != nil {
		return err
	}
	// Containers a previous runner left (it was killed) are stopped: their pods start over, as after a
	// kubelet restart that lost its containers.
	r.stopLeftovers()
	factory := informers.NewSharedInformerFactoryWithOptions(r.cfg.Kube, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = "spec.nodeName=" + r.cfg.Node
	}))
	inf := factory.Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { r.onPod(ctx, o) },
		UpdateFunc: func(_, o any) { r.onPod(ctx, o) },
		DeleteFunc: func(o any) { r.onDelete(o) },
	}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return ctx.Err()
	}
	r.cfg.Log.Info("pod runner serving", "node", r.cfg.Node)
	<-ctx.Done()
	r.mu.Lock()
	runs := make([]*podRun, 0, len(r.pods))
	for _, p := range r.pods {
		runs = append(runs, p)
	}
	r.mu.Unlock()
	for _, p := range runs {
		p.stop()
	}
	for _, p := range runs {
		<-p.done
	}
	return nil
}

func (r *Runner) onPod(ctx context.Context, o any) {
	pod, ok := o.(*corev1.Pod)
	if !ok {
		return
	}
	r.mu.Lock()
	p := r.pods[pod.UID]
	if p == nil {
		if pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			r.mu.Unlock()
			if pod.DeletionTimestamp != nil {
				go r.finishDeletion(ctx, pod, nil)
			}
			return
		}
		p = r.newPodRun(ctx, pod)
		r.pods[pod.UID] = p
		r.mu.Unlock()
		go p.run()
		return
	}
	r.mu.Unlock()
	if pod.DeletionTimestamp != nil && p.markDeleting() {
		go r.finishDeletion(ctx, pod, p)
	}
}

func (r *Runner) onDelete(o any) {
	if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = t.Obj
	}
	pod, ok := o.(*corev1.Pod)
	if !ok {
		return
	}
	r.mu.Lock()
	p := r.pods[pod.UID]
	delete(r.pods, pod.UID)
	r.mu.Unlock()
	if p != nil {
		p.stop()
		go func() { <-p.done; _ = os.RemoveAll(p.dir) }()
	}
}

// finishDeletion stops the pod's containers within its grace period and then removes the pod object, as
// the kubelet does once it has killed the containers.
func (r *Runner) finishDeletion(ctx context.Context, pod *corev1.Pod, p *podRun) {
	if p != nil {
		p.stop()
		<-p.done
		_ = os.RemoveAll(p.dir)
	}
	zero := int64(0)
	uid := pod.UID
	err := r.cfg.Kube.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		r.cfg.Log.Warn("delete pod", "pod", pod.Namespace+"/"+pod.Name, "err", err)
	}
}

// stopLeftovers kills the container processes recorded by an earlier runner that are still alive.
func (r *Runner) stopLeftovers() {
	files, _ := filepath.Glob(filepath.Join(r.cfg.Dir, "pods", "*", "*.pid"))
	for _, f := range files {
		pid, start, err := readPIDFile(f)
		if err == nil && procfs.Alive(pid, start) {
			r.cfg.Log.Info("stopping a container left by an earlier runner", "pidfile", f, "pid", pid)
			killGroup(pid, start, 5*time.Second)
		}
		_ = os.Remove(f)
	}
}

// containerState is what the runner knows of one container.
type containerState struct {
	name, image string
	ready       bool
	started     bool
	restarts    int32
	runs        int
	state       corev1.ContainerState
	last        corev1.ContainerState
	pid         int
}

func (c *containerState) status() corev1.ContainerStatus {
	st := corev1.ContainerStatus{Name: c.name, Image: c.image, ImageID: "host://debian-packages", Ready: c.ready,
		RestartCount: c.restarts, State: c.state, LastTerminationState: c.last}
	started := c.started
	st.Started = &started
	if c.pid > 0 {
		st.ContainerID = "host://" + strconv.Itoa(c.pid)
	}
	if st.State.Running == nil && st.State.Terminated == nil && st.State.Waiting == nil {
		st.State.Waiting = &corev1.ContainerStateWaiting{Reason: "PodInitializing"}
	}
	return st
}

// podRun is one pod's life on the node.
type podRun struct {
	r      *Runner
	dir    string
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	dirty  chan struct{}
	// stopWriter ends the status writer after a last write.
	stopWriter chan struct{}

	mu          sync.Mutex
	pod         *corev1.Pod
	init, main  []*containerState
	phase       corev1.PodPhase
	initialized bool
	startTime   metav1.Time
	deleting    bool
}

func (r *Runner) newPodRun(parent context.Context, pod *corev1.Pod) *podRun {
	ctx, cancel := context.WithCancel(parent)
	p := &podRun{r: r, dir: filepath.Join(r.cfg.Dir, "pods", string(pod.UID)), ctx: ctx, cancel: cancel,
		done: make(chan struct{}), dirty: make(chan struct{}, 1), stopWriter: make(chan struct{}), pod: pod.DeepCopy(), phase: corev1.PodPending,
		startTime: metav1.NewTime(time.Now())}
	// Restart counts survive a runner restart through the status the earlier runner wrote.
	prev := map[string]corev1.ContainerStatus{}
	for _, cs := range append(append([]corev1.ContainerStatus{}, pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...) {
		prev[cs.Name] = cs
	}
	state := func(c corev1.Container) *containerState {
		st := &containerState{name: c.Name, image: c.Image}
		if cs, ok := prev[c.Name]; ok {
			st.restarts = cs.RestartCount
			if cs.State.Running != nil || cs.State.Terminated != nil {
				st.runs = 1
			}
		}
		return st
	}
	for _, c := range pod.Spec.InitContainers {
		p.init = append(p.init, state(c))
	}
	for _, c := range pod.Spec.Containers {
		p.main = append(p.main, state(c))
	}
	return p
}

func (p *podRun) markDeleting() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.deleting {
		return false
	}
	p.deleting = true
	return true
}

func (p *podRun) stop() { p.cancel() }

func (p *podRun) key() string { return p.pod.Namespace + "/" + p.pod.Name }

func (p *podRun) log() *slog.Logger { return p.r.cfg.Log.With("pod", p.key()) }

func (p *podRun) touch() {
	select {
	case p.dirty <- struct{}{}:
	default:
	}
}

// run is the pod's whole life: inputs, init containers, containers, final phase.
func (p *podRun) run() {
	defer close(p.done)
	writerDone := make(chan struct{})
	go p.statusWriter(writerDone)
	defer func() { p.touch(); close(p.stopWriter); <-writerDone }()
	if err := os.MkdirAll(p.dir, 0o700); err != nil {
		p.log().Error("pod directory", "err", err)
		return
	}
	vols, ok := p.prepareVolumes()
	if !ok {
		return
	}
	pod := p.pod
	for i, c := range pod.Spec.InitContainers {
		for attempt := 0; ; attempt++ {
			code, err := p.runContainer(c, p.init[i], vols, false)
			if p.ctx.Err() != nil {
				return
			}
			if err == nil && code == 0 {
				break
			}
			if pod.Spec.RestartPolicy == corev1.RestartPolicyNever {
				p.setPhase(corev1.PodFailed)
				return
			}
			if !p.sleep(backoff(attempt)) {
				return
			}
		}
	}
	p.mu.Lock()
	p.initialized = true
	if p.phase == corev1.PodPending {
		p.phase = corev1.PodRunning
	}
	p.mu.Unlock()
	p.touch()

	var wg sync.WaitGroup
	codes := make([]int, len(pod.Spec.Containers))
	for i, c := range pod.Spec.Containers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i] = p.supervise(c, p.main[i], vols)
		}()
	}
	wg.Wait()
	if p.ctx.Err() != nil {
		return
	}
	phase := corev1.PodSucceeded
	for _, code := range codes {
		if code != 0 {
			phase = corev1.PodFailed
		}
	}
	p.setPhase(phase)
}

// prepareVolumes materialises the volumes, waiting (as the kubelet does) while an input is missing.
func (p *podRun) prepareVolumes() (map[string]string, bool) {
	for attempt := 0; ; attempt++ {
		src := p.sources()
		vols, err := src.materialize(p.ctx, filepath.Join(p.dir, "volumes"))
		if err == nil {
			return vols, true
		}
		if p.ctx.Err() != nil {
			return nil, false
		}
		p.waitingAll("CreateContainerConfigError", err.Error())
		if !p.sleep(min(backoff(attempt), 5*time.Second)) {
			return nil, false
		}
	}
}

func (p *podRun) sources() *sources {
	return &sources{kube: p.r.cfg.Kube, pod: p.pod, podIP: p.r.cfg.HostIP, hostIP: p.r.cfg.HostIP,
		configMap: map[string]*corev1.ConfigMap{}, secret: map[string]*corev1.Secret{}}
}

func (p *podRun) waitingAll(reason, msg string) {
	p.mu.Lock()
	for _, c := range append(append([]*containerState{}, p.init...), p.main...) {
		if c.state.Running == nil {
			c.state = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}
		}
	}
	p.mu.Unlock()
	p.touch()
}

func (p *podRun) setPhase(ph corev1.PodPhase) {
	p.mu.Lock()
	p.phase = ph
	p.mu.Unlock()
	p.touch()
}

func (p *podRun) sleep(d time.Duration) bool {
	select {
	case <-p.ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// backoff is the pause before restart attempt n: 1 s doubling up to 30 s (the kubelet's, shortened).
func backoff(n int) time.Duration {
	d := time.Second << min(n, 5)
	return min(d, 30*time.Second)
}

// supervise runs a container and restarts it as the pod's restart policy says; it returns the exit code
// of its last run.
func (p *podRun) supervise(c corev1.Container, st *containerState, vols map[string]string) int {
	policy := p.pod.Spec.RestartPolicy
	for attempt := 0; ; attempt++ {
		began := time.Now()
		code, err := p.runContainer(c, st, vols, true)
		if p.ctx.Err() != nil {
			return code
		}
		if err != nil {
			code = 128
		}
		if policy == corev1.RestartPolicyNever || policy == corev1.RestartPolicyOnFailure && code == 0 {
			return code
		}
		if time.Since(began) > 2*time.Minute {
			attempt = 0
		}
		p.mu.Lock()
		st.state = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff",
			Message: fmt.Sprintf("back-off restarting container %s (exit code %d)", c.Name, code)}}
		p.mu.Unlock()
		p.touch()
		if !p.sleep(backoff(attempt)) {
			return code
		}
	}
}

// runContainer starts one run of a container and waits for it to end (or the pod to stop, which sends it
// SIGTERM, then SIGKILL after the grace period). It returns the exit code.
func (p *podRun) runContainer(c corev1.Container, st *containerState, vols map[string]string, main bool) (int, error) {
	src := p.sources()
	base := []string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:" + p.r.cfg.ImageBin,
		"HOME=/root",
		"HOSTNAME=" + p.pod.Name,
		"LANG=C.UTF-8",
	}
	env, err := src.containerEnv(p.ctx, c, base)
	var ms []Mount
	if err == nil {
		ms, err = mounts(c, vols)
	}
	if err != nil {
		p.fail(st, "CreateContainerConfigError", err.Error())
		return 1, err
	}
	// The termination message file, at the container's own path; the default /dev/termination-log is
	// not provided (it would be a file in the machine's /dev).
	termFile := ""
	if tp := c.TerminationMessagePath; tp != "" && tp != corev1.TerminationMessagePathDefault {
		termFile = filepath.Join(p.dir, c.Name+".termination-log")
		if err := os.WriteFile(termFile, nil, 0o644); err != nil {
			return 1, err
		}
		ms = append(ms, Mount{Source: termFile, Target: tp})
	}
	spec := ProcessSpec{Argv: argv(c, env), Env: env, Dir: c.WorkingDir, Mounts: ms}
	logFile := filepath.Join(p.r.cfg.LogDir, fmt.Sprintf("%s_%s_%s.log", p.pod.Namespace, p.pod.Name, c.Name))
	if len(spec.Argv) == 0 {
		p.fail(st, "CreateContainerError", "container has no command: the pod runner has no image entrypoint to fall back on")
		return 1, errors.New("no command")
	}
	logLine(logFile, fmt.Sprintf("\n=== %s starting (pod runner): %s\n", time.Now().Format(time.RFC3339), strings.Join(spec.Argv, " ")))
	cmd, err := startProcess(p.r.cfg.Self, filepath.Join(p.dir, c.Name+".json"), logFile, spec)
	if err != nil {
		p.fail(st, "StartError", err.Error())
		return 1, err
	}
	pid := cmd.Process.Pid
	start, _ := procfs.Start(pid)
	pidFile := filepath.Join(p.dir, c.Name+".pid")
	_ = os.WriteFile(pidFile, fmt.Appendf(nil, "%d %d\n", pid, start), 0o600)
	began := metav1.NewTime(time.Now())
	p.mu.Lock()
	if st.runs > 0 {
		st.restarts++
	}
	st.runs++
	st.pid = pid
	st.started = true
	st.ready = main && c.ReadinessProbe == nil
	st.state = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: began}}
	p.mu.Unlock()
	p.touch()

	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	if main && c.ReadinessProbe != nil {
		go p.probeLoop(c, st, ms, env, exited)
	}
	select {
	case <-exited:
	case <-p.ctx.Done():
		grace := p.r.cfg.StopGrace
		if g := p.pod.Spec.TerminationGracePeriodSeconds; g != nil && time.Duration(*g)*time.Second < grace {
			grace = time.Duration(*g) * time.Second
		}
		_ = syscall.Kill(-pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(grace):
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			<-exited
		}
	}
	// Whatever the command left in its session (forked workers) goes with it.
	procfs.KillSession(pid)
	_ = os.Remove(pidFile)
	code := 0
	if waitErr != nil {
		var ee *exec.ExitError
		if errors.As(waitErr, &ee) {
			code = ee.ExitCode()
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				code = 128 + int(ws.Signal())
			}
		} else {
			code = 1
		}
	}
	term := &corev1.ContainerStateTerminated{ExitCode: int32(code), StartedAt: began, FinishedAt: metav1.NewTime(time.Now()),
		ContainerID: "host://" + strconv.Itoa(pid), Reason: "Completed"}
	if termFile != "" {
		term.Message = logTail(termFile, 100, 4096)
	}
	if code != 0 {
		term.Reason = "Error"
		// As terminationMessagePolicy FallbackToLogsOnError: the tail of the log says why.
		if term.Message == "" {
			term.Message = logTail(logFile, 20, 4096)
		}
	}
	p.mu.Lock()
	st.ready = false
	st.state = corev1.ContainerState{Terminated: term}
	st.last = corev1.ContainerState{Terminated: term}
	p.mu.Unlock()
	p.touch()
	return code, nil
}

func (p *podRun) fail(st *containerState, reason, msg string) {
	p.mu.Lock()
	st.state = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}
	p.mu.Unlock()
	p.touch()
	p.log().Warn("container not started", "container", st.name, "reason", reason, "message", msg)
}

// probeLoop runs the container's readiness probe while it runs.
func (p *podRun) probeLoop(c corev1.Container, st *containerState, ms []Mount, env []string, exited <-chan struct{}) {
	pr := c.ReadinessProbe
	period := time.Duration(max(pr.PeriodSeconds, 1)) * time.Second
	timeout := time.Duration(max(pr.TimeoutSeconds, 1)) * time.Second
	failures, successes := 0, 0
	delay := time.Duration(pr.InitialDelaySeconds) * time.Second
	for {
		select {
		case <-exited:
			return
		case <-p.ctx.Done():
			return
		case <-time.After(delay):
		}
		// Until the first success, probe every second: the period is for steady state.
		delay = period
		ok := p.probe(c, pr, ms, env, timeout)
		p.mu.Lock()
		if !st.ready && !ok {
			delay = min(period, time.Second)
		}
		changed := false
		if ok {
			successes++
			failures = 0
			if !st.ready && successes >= int(max(pr.SuccessThreshold, 1)) {
				st.ready, changed = true, true
			}
		} else {
			failures++
			successes = 0
			if st.ready && failures >= int(max(pr.FailureThreshold, 1)) {
				st.ready, changed = false, true
			}
		}
		p.mu.Unlock()
		if changed {
			p.touch()
		}
	}
}

func (p *podRun) probe(c corev1.Container, pr *corev1.Probe, ms []Mount, env []string, timeout time.Duration) bool {
	host := p.r.cfg.HostIP
	port := func(v intstr.IntOrString) string {
		if v.Type == intstr.Int {
			return strconv.Itoa(v.IntValue())
		}
		for _, cp := range c.Ports {
			if cp.Name == v.StrVal {
				return strconv.Itoa(int(cp.ContainerPort))
			}
		}
		return v.StrVal
	}
	switch {
	case pr.HTTPGet != nil:
		h := host
		if pr.HTTPGet.Host != "" {
			h = pr.HTTPGet.Host
		}
		scheme := strings.ToLower(string(pr.HTTPGet.Scheme))
		if scheme == "" {
			scheme = "http"
		}
		url := fmt.Sprintf("%s://%s%s", scheme, net.JoinHostPort(h, port(pr.HTTPGet.Port)), pr.HTTPGet.Path)
		ctx, cancel := context.WithTimeout(p.ctx, timeout)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode >= 200 && resp.StatusCode < 400
	case pr.TCPSocket != nil:
		h := host
		if pr.TCPSocket.Host != "" {
			h = pr.TCPSocket.Host
		}
		conn, err := net.DialTimeout("tcp", net.JoinHostPort(h, port(pr.TCPSocket.Port)), timeout)
		if err != nil {
			return false
		}
		conn.Close()
		return true
	case pr.Exec != nil:
		spec := ProcessSpec{Argv: pr.Exec.Command, Env: env, Dir: c.WorkingDir, Mounts: ms}
		cmd, err := startProcess(p.r.cfg.Self, filepath.Join(p.dir, c.Name+"-probe.json"), os.DevNull, spec)
		if err != nil {
			return false
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			return err == nil
		case <-time.After(timeout):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
			return false
		}
	}
	return true
}

// statusWriter writes the pod's status whenever it changed, coalescing changes made meanwhile.
func (p *podRun) statusWriter(done chan<- struct{}) {
	defer close(done)
	write := func() {
		if err := p.writeStatus(); err != nil && !apierrors.IsNotFound(err) {
			p.log().Warn("write pod status", "err", err)
		}
	}
	for {
		select {
		case <-p.dirty:
			write()
		case <-p.stopWriter:
			select {
			case <-p.dirty:
				write()
			default:
			}
			return
		}
	}
}

func (p *podRun) writeStatus() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pods := p.r.cfg.Kube.CoreV1().Pods(p.pod.Namespace)
	return retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		cur, err := pods.Get(ctx, p.pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cur.UID != p.pod.UID {
			return nil
		}
		cur.Status = p.status(cur.Status)
		_, err = pods.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
}

// status is the pod's status as the runner sees it, keeping conditions others own (PodScheduled).
func (p *podRun) status(prev corev1.PodStatus) corev1.PodStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := corev1.PodStatus{
		Phase:     p.phase,
		HostIP:    p.r.cfg.HostIP,
		HostIPs:   []corev1.HostIP{{IP: p.r.cfg.HostIP}},
		PodIP:     p.r.cfg.HostIP,
		PodIPs:    []corev1.PodIP{{IP: p.r.cfg.HostIP}},
		StartTime: &p.startTime,
		QOSClass:  prev.QOSClass,
	}
	allReady := len(p.main) > 0
	for _, c := range p.init {
		st.InitContainerStatuses = append(st.InitContainerStatuses, c.status())
	}
	for _, c := range p.main {
		st.ContainerStatuses = append(st.ContainerStatuses, c.status())
		allReady = allReady && c.ready
	}
	if p.phase == corev1.PodSucceeded || p.phase == corev1.PodFailed {
		allReady = false
	}
	now := metav1.NewTime(time.Now())
	cond := func(t corev1.PodConditionType, ok bool, reason string) corev1.PodCondition {
		s := corev1.ConditionFalse
		if ok {
			s, reason = corev1.ConditionTrue, ""
		}
		for _, c := range prev.Conditions {
			if c.Type == t && c.Status == s {
				return c
			}
		}
		return corev1.PodCondition{Type: t, Status: s, Reason: reason, LastTransitionTime: now}
	}
	for _, c := range prev.Conditions {
		switch c.Type {
		case corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady:
		default:
			st.Conditions = append(st.Conditions, c)
		}
	}
	st.Conditions = append(st.Conditions,
		cond(corev1.PodInitialized, p.initialized, "ContainersNotInitialized"),
		cond(corev1.ContainersReady, allReady, "ContainersNotReady"),
		cond(corev1.PodReady, allReady, "ContainersNotReady"))
	return st
}

// logLine appends a line of the runner's own to a container's log.
func logLine(path, line string) {
	_ = os.MkdirAll(filepath.Dir(path), 0o755)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	_, _ = f.WriteString(line)
}

// logTail is the last n lines of a log, at most max bytes.
func logTail(path string, n, max int) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	s := strings.Join(lines, "\n")
	if len(s) > max {
		s = s[len(s)-max:]
	}
	return s
}

func readPIDFile(path string) (int, uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, err
	}
	var pid int
	var start uint64
	if _, err := fmt.Sscanf(string(b), "%d %d", &pid, &start); err != nil {
		return 0, 0, err
	}
	return pid, start, nil
}

// killGroup sends SIGTERM to the process group, then SIGKILL after grace, and kills what is left of its
// session.
func killGroup(pid int, start uint64, grace time.Duration) {
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	deadline := time.Now().Add(grace)
	for procfs.Alive(pid, start) && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	procfs.KillSession(pid)
}
