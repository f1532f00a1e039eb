package actuator

import (
	"strings"
	"testing"
)

func TestNew(t *testing.T) {
	cfg := DefaultConfig()
	if _, err := New("ec2", cfg); err == nil || !strings.Contains(err.Error(), `unknown actuator "ec2" (want one of local, kubernetes, manual)`) {
		t.Fatalf("unknown name: err %v", err)
	}
	if _, err := New(Local, cfg); err == nil || !strings.Contains(err.Error(), "Dir is empty") {
		t.Fatalf("local without Dir: err %v", err)
	}
	cfg.Local.Dir = t.TempDir()
	for _, name := range []string{Local, Manual} {
		a, err := New(name, cfg)
		if err != nil || a.Name() != name {
			t.Fatalf("New(%s) = %v, %v", name, a, err)
		}
	}
	// Outside a cluster, without a kubeconfig, the error says so.
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	if _, err := New(Kubernetes, cfg); err == nil || !strings.Contains(err.Error(), "kubernetes actuator") {
		t.Fatalf("kubernetes outside a cluster: err %v", err)
	}
	cfg.Kubernetes.MaxReplicas = 0
	if err := cfg.Validate(Kubernetes); err == nil {
		t.Fatal("MaxReplicas 0 accepted")
	}
}
