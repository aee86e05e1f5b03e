package e2e

import (
	"errors"
	"fmt"
	"os"
	"sync"
)

// TB is what the harness's processes need of a test. A *testing.T has it; so has a Scope, with which a
// package's TestMain starts what all its tests share.
type TB interface {
	Helper()
	Cleanup(func())
	Errorf(format string, args ...any)
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Failed() bool
	Logf(format string, args ...any)
	Name() string
	TempDir() string
}

// Scope is a TB that lives as long as a package's tests: TestMain starts shared processes in it and
// closes it after m.Run. Its cleanups run, last first, at Close; Fatal ends the Do that called it.
type Scope struct {
	name string
	dir  string

	mu       sync.Mutex
	failed   bool
	errs     []error
	cleanups []func()
}

// NewScope makes a scope named name (its processes' logs go under a scratch directory of its own).
func NewScope(name string) (*Scope, error) {
	dir, err := os.MkdirTemp("", "stackflow-scope-"+name+"-")
	if err != nil {
		return nil, err
	}
	return &Scope{name: name, dir: dir}, nil
}

// scopeFatal is what Fatal panics with, for Do to recover.
type scopeFatal struct{}

// Do runs f, returning the error of a Fatal or Fatalf it called.
func (s *Scope) Do(f func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(scopeFatal); !ok {
				panic(r)
			}
			s.mu.Lock()
			err = errors.Join(s.errs...)
			s.mu.Unlock()
		}
	}()
	f()
	return nil
}

// Close runs the cleanups, last first, and removes the scratch directory; it returns every error
// reported since the scope was made.
func (s *Scope) Close() error {
	for {
		s.mu.Lock()
		n := len(s.cleanups)
		if n == 0 {
			s.mu.Unlock()
			break
		}
		f := s.cleanups[n-1]
		s.cleanups = s.cleanups[:n-1]
		s.mu.Unlock()
		f()
	}
	_ = os.RemoveAll(s.dir)
	s.mu.Lock()
	defer s.mu.Unlock()
	return errors.Join(s.errs...)
}

// Helper does nothing: a scope prints no call sites.
func (s *Scope) Helper() {}

// Cleanup registers f to run at Close.
func (s *Scope) Cleanup(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cleanups = append(s.cleanups, f)
}

// Errorf reports an error and goes on.
func (s *Scope) Errorf(format string, args ...any) {
	err := fmt.Errorf(format, args...)
	fmt.Fprintf(os.Stderr, "%s: %v\n", s.name, err)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failed = true
	s.errs = append(s.errs, err)
}

// Fatal reports an error and ends the Do that called it.
func (s *Scope) Fatal(args ...any) {
	s.Errorf("%s", fmt.Sprint(args...))
	panic(scopeFatal{})
}

// Fatalf reports an error and ends the Do that called it.
func (s *Scope) Fatalf(format string, args ...any) {
	s.Errorf(format, args...)
	panic(scopeFatal{})
}

// Failed says whether an error was reported.
func (s *Scope) Failed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failed
}

// Logf prints to standard error, which go test shows for a failed package.
func (s *Scope) Logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, s.name+": "+format+"\n", args...)
}

// Name is the scope's name.
func (s *Scope) Name() string { return s.name }

// TempDir is the scope's scratch directory.
func (s *Scope) TempDir() string { return s.dir }
