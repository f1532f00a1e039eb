// Package deploy holds the container image and Kubernetes manifests; this
// test keeps them consistent with each other and with the server's ports.
package deploy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/tidekv/tidekv/internal/launcher"
)

// manifests decodes every document of kubernetes/*.yaml strictly (unknown
// or misspelt fields fail) into typed objects.
func manifests(t *testing.T) []runtime.Object {
	t.Helper()
	files, err := filepath.Glob("kubernetes/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests: %v", err)
	}
	dec := json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme.Scheme, scheme.Scheme,
		json.SerializerOptions{Yaml: true, Strict: true})
	var objs []runtime.Object
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
		for {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if len(bytes.TrimSpace(doc)) == 0 {
				continue
			}
			obj, _, err := dec.Decode(doc, nil, nil)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			objs = append(objs, obj)
		}
	}
	return objs
}

func only[T any](t *testing.T, objs []runtime.Object) []T {
	t.Helper()
	var out []T
	for _, o := range objs {
		if x, ok := o.(T); ok {
			out = append(out, x)
		}
	}
	if len(out) == 0 {
		var zero T
		t.Fatalf("no %T in the manifests", zero)
	}
	return out
}

// The port layout of a node, from the launcher (whose base is the server's
// default gRPC port).
func wantPorts() map[string]int32 {
	base := launcher.DefaultConfig().BasePort
	return map[string]int32{
		"grpc":       int32(launcher.Port(base, 1, launcher.OffsetGRPC)),
		"http":       int32(launcher.Port(base, 1, launcher.OffsetHTTP)),
		"redis":      int32(launcher.Port(base, 1, launcher.OffsetRedis)),
		"gossip":     int32(launcher.Port(base, 1, launcher.OffsetGossip)),
		"gossip-udp": int32(launcher.Port(base, 1, launcher.OffsetGossip)),
	}
}

func TestManifests(t *testing.T) {
	objs := manifests(t)
	sts := only[*appsv1.StatefulSet](t, objs)[0]
	pod := sts.Spec.Template
	c := pod.Spec.Containers[0]
	script := strings.Join(append(slices.Clone(c.Command), c.Args...), " ")

	t.Run("statefulset", func(t *testing.T) {
		ports := map[string]int32{}
		for _, p := range c.Ports {
			ports[p.Name] = p.ContainerPort
		}
		if fmt.Sprint(ports) != fmt.Sprint(wantPorts()) {
			t.Errorf("container ports %v, want %v", ports, wantPorts())
		}
		for _, flag := range []string{"--data-dir /data --insecure", `--listen "$POD_IP:7400"`, `--advertise "$POD_NAME.$peer:7400"`, `--http-listen "$POD_IP:7401"`, `--redis-listen "$POD_IP:7402"`, `--gossip-listen "$POD_IP:7403"`, "--join"} {
			if !strings.Contains(script, flag) {
				t.Errorf("command lacks %q:\n%s", flag, script)
			}
		}
		if len(sts.Spec.VolumeClaimTemplates) != 1 || len(c.VolumeMounts) != 1 ||
			c.VolumeMounts[0].Name != sts.Spec.VolumeClaimTemplates[0].Name || c.VolumeMounts[0].MountPath != "/data" {
			t.Errorf("the data volume claim is not mounted at /data: %+v", c.VolumeMounts)
		}
		if p := sts.Spec.PersistentVolumeClaimRetentionPolicy; p == nil || p.WhenScaled != appsv1.DeletePersistentVolumeClaimRetentionPolicyType {
			t.Errorf("a scaled-in (drained) pod's volume must be deleted: %+v", p)
		}
		for name, pr := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe, "startup": c.StartupProbe} {
			if pr == nil || pr.HTTPGet == nil || pr.HTTPGet.Path != "/health" || pr.HTTPGet.Port.String() != "http" {
				t.Errorf("%s probe is not GET /health on the http port: %+v", name, pr)
			}
		}
	})

	t.Run("services", func(t *testing.T) {
		svcs := only[*corev1.Service](t, objs)
		byName := map[string]*corev1.Service{}
		for _, s := range svcs {
			byName[s.Name] = s
			for k, v := range s.Spec.Selector {
				if pod.Labels[k] != v {
					t.Errorf("service %s selects %s=%s, which the pods lack", s.Name, k, v)
				}
			}
			for _, p := range s.Spec.Ports {
				if want, ok := wantPorts()[p.TargetPort.String()]; !ok || p.Port != want {
					t.Errorf("service %s port %s: %d -> %s, want a container port named so, numbered %d", s.Name, p.Name, p.Port, p.TargetPort.String(), want)
				}
			}
		}
		peer := byName[sts.Spec.ServiceName]
		if peer == nil || peer.Spec.ClusterIP != corev1.ClusterIPNone || !peer.Spec.PublishNotReadyAddresses {
			t.Errorf("statefulset's service %q is not headless with not-ready addresses published", sts.Spec.ServiceName)
		}
		if !strings.Contains(script, `peer="`+sts.Spec.ServiceName+".") || !strings.Contains(script, "tidekv-$i.$peer:7400") {
			t.Errorf("--join does not go through the headless service %s", sts.Spec.ServiceName)
		}
		var client []string
		for _, s := range svcs {
			if s.Spec.ClusterIP != corev1.ClusterIPNone {
				for _, p := range s.Spec.Ports {
					client = append(client, p.Name)
				}
			}
		}
		if slices.Sort(client); !slices.Equal(client, []string{"grpc", "http", "redis"}) {
			t.Errorf("client service ports %v, want grpc, http, redis", client)
		}
	})

	t.Run("rbac", func(t *testing.T) {
		sa := only[*corev1.ServiceAccount](t, objs)[0]
		if pod.Spec.ServiceAccountName != sa.Name {
			t.Errorf("pods run as %q, not the service account %q", pod.Spec.ServiceAccountName, sa.Name)
		}
		role := only[*rbacv1.Role](t, objs)[0]
		ok := false
		for _, r := range role.Rules {
			ok = ok || slices.Contains(r.APIGroups, "apps") && slices.Contains(r.Resources, "statefulsets/scale") &&
				slices.Contains(r.Verbs, "get") && slices.Contains(r.Verbs, "update") && slices.Contains(r.Verbs, "patch") &&
				(len(r.ResourceNames) == 0 || slices.Contains(r.ResourceNames, sts.Name))
		}
		if !ok {
			t.Errorf("role %s does not allow get/update/patch on statefulsets/scale of %s: %+v", role.Name, sts.Name, role.Rules)
		}
		rb := only[*rbacv1.RoleBinding](t, objs)[0]
		if rb.RoleRef.Kind != "Role" || rb.RoleRef.Name != role.Name || len(rb.Subjects) != 1 ||
			rb.Subjects[0].Kind != "ServiceAccount" || rb.Subjects[0].Name != sa.Name {
			t.Errorf("role binding %s does not bind role %s to service account %s: %+v", rb.Name, role.Name, sa.Name, rb)
		}
	})

	t.Run("pdb", func(t *testing.T) {
		pdb := only[*policyv1.PodDisruptionBudget](t, objs)[0]
		if m := pdb.Spec.MaxUnavailable; m == nil || m.String() != "1" {
			t.Errorf("PDB maxUnavailable %v, want 1", m)
		}
		for k, v := range pdb.Spec.Selector.MatchLabels {
			if pod.Labels[k] != v {
				t.Errorf("PDB selects %s=%s, which the pods lack", k, v)
			}
		}
	})
}

func TestDockerfileExposesThePorts(t *testing.T) {
	b, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var exposed []string
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == "EXPOSE" {
			exposed = append(exposed, f[1:]...)
		}
	}
	for name, p := range wantPorts() {
		want := fmt.Sprint(p)
		if strings.HasSuffix(name, "-udp") {
			want += "/udp"
		}
		if !slices.Contains(exposed, want) {
			t.Errorf("Dockerfile EXPOSE %v lacks %s (%s)", exposed, want, name)
		}
	}
	if !strings.Contains(string(b), "./cmd/tidekv") || !strings.Contains(string(b), "/usr/local/bin/tidekv") {
		t.Error("Dockerfile does not build ./cmd/tidekv into /usr/local/bin/tidekv")
	}
}
