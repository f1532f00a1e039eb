package kubernetes

import (
	"context"
	"strings"
	"testing"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/tidekv/tidekv/internal/control"
)

// scaleReactors serves the scale subresource from *replicas, which the
// default object tracker cannot do (it returns the StatefulSet itself).
// conflict, when set, makes updates fail as a concurrent writer would.
func scaleReactors(cs *fake.Clientset, replicas *int32, conflict *bool) {
	cs.PrependReactor("get", "statefulsets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "scale" {
			return false, nil, nil
		}
		name := a.(k8stesting.GetAction).GetName()
		return true, &autoscalingv1.Scale{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: a.GetNamespace(), ResourceVersion: "7"},
			Spec:       autoscalingv1.ScaleSpec{Replicas: *replicas},
			Status:     autoscalingv1.ScaleStatus{Replicas: *replicas},
		}, nil
	})
	cs.PrependReactor("update", "statefulsets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "scale" {
			return false, nil, nil
		}
		sc := a.(k8stesting.UpdateAction).GetObject().(*autoscalingv1.Scale)
		if *conflict {
			return true, nil, apierrors.NewConflict(schema.GroupResource{Group: "apps", Resource: "statefulsets"}, sc.Name, nil)
		}
		*replicas = sc.Spec.Replicas
		return true, sc, nil
	})
}

// step is one recorded client action, reduced to what the tests check.
type step struct {
	verb     string
	replicas int32 // of an update
}

func steps(t *testing.T, cs *fake.Clientset) []step {
	t.Helper()
	var out []step
	for _, a := range cs.Actions() {
		if a.GetResource().Resource != "statefulsets" || a.GetSubresource() != "scale" || a.GetNamespace() != "db" {
			t.Fatalf("unexpected action %s %s/%s in %q", a.GetVerb(), a.GetResource().Resource, a.GetSubresource(), a.GetNamespace())
		}
		s := step{verb: a.GetVerb()}
		if u, ok := a.(k8stesting.UpdateAction); ok {
			s.replicas = u.GetObject().(*autoscalingv1.Scale).Spec.Replicas
		}
		out = append(out, s)
	}
	cs.ClearActions()
	return out
}

func fakeActuator(t *testing.T, replicas int32) (*Actuator, *fake.Clientset, *int32, *bool) {
	t.Helper()
	cs := fake.NewClientset()
	r, conflict := replicas, false
	scaleReactors(cs, &r, &conflict)
	cfg := DefaultConfig()
	cfg.Namespace, cfg.MaxReplicas = "db", 5
	a, err := NewWithClient(cfg, cs)
	if err != nil {
		t.Fatal(err)
	}
	return a, cs, &r, &conflict
}

func member(id uint64, ord string) control.Member {
	return control.Member{ID: id, Addr: "tidekv-" + ord + ".tidekv-peer.db.svc.cluster.local:7400"}
}

func TestFakeClientsetScaleOut(t *testing.T) {
	a, cs, r, conflict := fakeActuator(t, 3)
	ctx := context.Background()
	msg, err := a.ScaleOut(ctx, 2, []string{"ignored:1"})
	if err != nil || *r != 5 || msg != "kubernetes: statefulset db/tidekv replicas 3 -> 5" {
		t.Fatalf("ScaleOut = %q, %v; replicas %d", msg, err, *r)
	}
	if got := steps(t, cs); len(got) != 2 || got[0].verb != "get" || got[1] != (step{"update", 5}) {
		t.Fatalf("actions %+v, want get then update to 5", got)
	}
	// At MaxReplicas: refused after the read, nothing written.
	if _, err := a.ScaleOut(ctx, 1, nil); err == nil || !strings.Contains(err.Error(), "exceed MaxReplicas 5") {
		t.Fatalf("ScaleOut past max: %v", err)
	}
	if got := steps(t, cs); len(got) != 1 || got[0].verb != "get" {
		t.Fatalf("actions %+v, want a single get", got)
	}
	*r, *conflict = 3, true
	if _, err := a.ScaleOut(ctx, 1, nil); !apierrors.IsConflict(err) {
		t.Fatalf("conflicting update: err %v, want a conflict", err)
	}
}

func TestFakeClientsetVictimAndRemove(t *testing.T) {
	a, cs, r, _ := fakeActuator(t, 3)
	ctx := context.Background()
	members := []control.Member{member(1, "0"), member(4, "2"), member(9, "1"), {ID: 12, Addr: "10.1.2.3:7400"}}
	v, err := a.Victim(members)
	if err != nil || v.ID != 4 {
		t.Fatalf("Victim = %+v, %v; want ID 4 (ordinal 2)", v, err)
	}
	if _, err := a.Victim(members[3:]); err == nil {
		t.Fatal("Victim picked a member whose address names no pod")
	}
	if _, err := a.Remove(ctx, members[2]); err == nil || !strings.Contains(err.Error(), "only the highest ordinal (2)") {
		t.Fatalf("Remove of ordinal 1 of 3: %v", err)
	}
	if got := steps(t, cs); len(got) != 1 || got[0].verb != "get" {
		t.Fatalf("refused Remove wrote: %+v", got)
	}
	msg, err := a.Remove(ctx, v)
	if err != nil || *r != 2 || !strings.Contains(msg, "replicas 3 -> 2") {
		t.Fatalf("Remove = %q, %v; replicas %d", msg, err, *r)
	}
	if got := steps(t, cs); len(got) != 2 || got[1] != (step{"update", 2}) {
		t.Fatalf("actions %+v, want get then update to 2", got)
	}
	*r = 1
	if _, err := a.Remove(ctx, member(1, "0")); err == nil || !strings.Contains(err.Error(), "below MinReplicas") {
		t.Fatalf("Remove of the last pod: %v", err)
	}
}

func TestOrdinalParsing(t *testing.T) {
	a, _, _, _ := fakeActuator(t, 1)
	for addr, want := range map[string]int{
		"tidekv-0.tidekv-peer.db.svc.cluster.local:7400": 0,
		"tidekv-12.tidekv-peer:7400":                     12,
		"tidekv-3:7400":                                  3,
	} {
		if got, err := a.ordinal(addr); err != nil || got != want {
			t.Errorf("ordinal(%s) = %d, %v; want %d", addr, got, err, want)
		}
	}
	for _, addr := range []string{"10.0.0.1:7400", "other-1.svc:7400", "tidekv-x.svc:7400", "tidekv--1.svc:7400", "tidekv-01.svc:7400", "tidekv-db-1.svc:7400"} {
		if got, err := a.ordinal(addr); err == nil {
			t.Errorf("ordinal(%s) = %d, want an error", addr, got)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	for _, mut := range []func(*Config){
		func(c *Config) { c.StatefulSet = "" },
		func(c *Config) { c.MinReplicas = 0 },
		func(c *Config) { c.MaxReplicas = 0 },
		func(c *Config) { c.RequestTimeout = 0 },
		func(c *Config) { c.Namespace = "" },
	} {
		c := DefaultConfig()
		c.Namespace = "db"
		mut(&c)
		if _, err := NewWithClient(c, fake.NewClientset()); err == nil {
			t.Errorf("config %+v accepted", c)
		}
	}
}
