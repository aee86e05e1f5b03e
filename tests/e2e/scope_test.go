package e2e

import (
	"strings"
	"testing"
)

func TestScope(t *testing.T) {
	tests := []struct {
		name       string
		do         func(s *Scope)
		wantErr    string
		wantFailed bool
		wantAfter  bool
	}{
		{name: "nothing goes wrong", do: func(s *Scope) {}, wantAfter: true},
		{name: "Fatalf ends Do with its message", do: func(s *Scope) { s.Fatalf("start %s: %d", "worker", 3) },
			wantErr: "start worker: 3", wantFailed: true},
		{name: "Fatal too", do: func(s *Scope) { s.Fatal("no port") }, wantErr: "no port", wantFailed: true},
		{name: "Errorf goes on", do: func(s *Scope) { s.Errorf("late: %v", 1) }, wantFailed: true, wantAfter: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := NewScope("unit")
			if err != nil {
				t.Fatal(err)
			}
			var order []int
			s.Cleanup(func() { order = append(order, 1) })
			s.Cleanup(func() { order = append(order, 2) })
			after := false
			err = s.Do(func() { tt.do(s); after = true })
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("Do = %v, want %q", err, tt.wantErr)
			}
			if after != tt.wantAfter {
				t.Errorf("code after the call ran = %v, want %v", after, tt.wantAfter)
			}
			if s.Failed() != tt.wantFailed {
				t.Errorf("Failed = %v, want %v", s.Failed(), tt.wantFailed)
			}
			closeErr := s.Close()
			if (closeErr != nil) != tt.wantFailed {
				t.Errorf("Close = %v, want an error: %v", closeErr, tt.wantFailed)
			}
			if len(order) != 2 || order[0] != 2 || order[1] != 1 {
				t.Errorf("cleanups ran %v, want last first [2 1]", order)
			}
		})
	}
}

func TestScopePassesOnOtherPanics(t *testing.T) {
	s, err := NewScope("unit")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	defer func() {
		if r := recover(); r != "boom" {
			t.Errorf("recovered %v, want the panic itself", r)
		}
	}()
	_ = s.Do(func() { panic("boom") })
}
