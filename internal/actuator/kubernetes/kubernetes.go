// Package kubernetes is the actuator that sizes a TideKV StatefulSet
// through its scale subresource. Pods are named <statefulset>-<ordinal>;
// Kubernetes adds and removes them at the highest ordinal, so a scale-in
// drains the highest-ordinal node first and only then lowers replicas by
// one, never below a node that still holds data.
package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/tidekv/tidekv/internal/control"
)

// Config configures the Kubernetes actuator.
type Config struct {
	// Namespace of the StatefulSet; "" means $POD_NAMESPACE, else the
	// namespace of the pod's service account.
	Namespace string
	// StatefulSet is the name of the TideKV StatefulSet.
	StatefulSet string
	// Kubeconfig is a kubeconfig file to use; "" means the in-cluster
	// configuration (the pod's service account).
	Kubeconfig string
	// MinReplicas and MaxReplicas bound the replicas the actuator sets.
	MinReplicas, MaxReplicas int
	// RequestTimeout bounds each API request.
	RequestTimeout time.Duration
}

// DefaultConfig returns StatefulSet "tidekv", 1 to 16 replicas and a 10 s
// request timeout, in-cluster.
func DefaultConfig() Config {
	return Config{StatefulSet: "tidekv", MinReplicas: 1, MaxReplicas: 16, RequestTimeout: 10 * time.Second}
}

// Validate reports the first problem with c.
func (c Config) Validate() error {
	switch {
	case c.StatefulSet == "":
		return errors.New("kubernetes actuator: StatefulSet name is empty")
	case c.MinReplicas < 1:
		return fmt.Errorf("kubernetes actuator: MinReplicas must be >= 1, got %d", c.MinReplicas)
	case c.MaxReplicas < c.MinReplicas:
		return fmt.Errorf("kubernetes actuator: MaxReplicas %d is below MinReplicas %d", c.MaxReplicas, c.MinReplicas)
	case c.RequestTimeout <= 0:
		return fmt.Errorf("kubernetes actuator: RequestTimeout must be > 0, got %v", c.RequestTimeout)
	}
	return nil
}

// serviceAccountNamespace is where a pod finds its own namespace.
const serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// Actuator scales one StatefulSet.
type Actuator struct {
	cfg    Config
	client k8s.Interface
}

var _ control.Actuator = (*Actuator)(nil)

// New builds a client from the in-cluster configuration or cfg.Kubeconfig
// and resolves the namespace.
func New(cfg Config) (*Actuator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var rc *rest.Config
	var err error
	if cfg.Kubeconfig != "" {
		rc, err = clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig)
	} else {
		rc, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes actuator: API client configuration: %w", err)
	}
	if cfg.Namespace == "" {
		if cfg.Namespace, err = podNamespace(); err != nil {
			return nil, err
		}
	}
	rc.Timeout = cfg.RequestTimeout
	// JSON rather than protobuf: a Scale is tiny, and JSON reads plainly in
	// audit logs and in the contract test that checks each request.
	rc.ContentType, rc.AcceptContentTypes = "application/json", "application/json"
	client, err := k8s.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes actuator: %w", err)
	}
	return NewWithClient(cfg, client)
}

func podNamespace() (string, error) {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns, nil
	}
	b, err := os.ReadFile(serviceAccountNamespace)
	if err != nil || strings.TrimSpace(string(b)) == "" {
		return "", errors.New("kubernetes actuator: no Namespace configured, $POD_NAMESPACE unset and no service-account namespace")
	}
	return strings.TrimSpace(string(b)), nil
}

// NewWithClient uses client (e.g. a fake clientset); cfg.Namespace must be
// set.
func NewWithClient(cfg Config, client k8s.Interface) (*Actuator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Namespace == "" {
		return nil, errors.New("kubernetes actuator: Namespace is empty")
	}
	return &Actuator{cfg: cfg, client: client}, nil
}

// Name returns "kubernetes".
func (a *Actuator) Name() string { return "kubernetes" }

func (a *Actuator) target() string { return a.cfg.Namespace + "/" + a.cfg.StatefulSet }

// ScaleOut raises replicas by count. New pods join through the address in
// the StatefulSet's pod template, so join is not used.
func (a *Actuator) ScaleOut(ctx context.Context, count int, _ []string) (string, error) {
	if count < 1 {
		return "", fmt.Errorf("kubernetes actuator: scale-out count must be >= 1, got %d", count)
	}
	sets := a.client.AppsV1().StatefulSets(a.cfg.Namespace)
	sc, err := sets.GetScale(ctx, a.cfg.StatefulSet, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("kubernetes actuator: reading the scale of statefulset %s: %w", a.target(), err)
	}
	from := int(sc.Spec.Replicas)
	if from+count > a.cfg.MaxReplicas {
		return "", fmt.Errorf("kubernetes actuator: statefulset %s has %d replicas; %d more would exceed MaxReplicas %d", a.target(), from, count, a.cfg.MaxReplicas)
	}
	sc.Spec.Replicas = int32(from + count)
	// The scale object carries the resourceVersion read above, so a
	// concurrent change makes the update fail with a conflict instead of
	// being overwritten.
	if _, err := sets.UpdateScale(ctx, a.cfg.StatefulSet, sc, metav1.UpdateOptions{}); err != nil {
		return "", fmt.Errorf("kubernetes actuator: raising statefulset %s from %d to %d replicas: %w", a.target(), from, from+count, err)
	}
	return fmt.Sprintf("kubernetes: statefulset %s replicas %d -> %d", a.target(), from, from+count), nil
}

// Victim picks the member with the highest pod ordinal, read from the host
// of its address ("<statefulset>-<ordinal>.<service>..."). Members whose
// address names no pod of the StatefulSet are ignored.
func (a *Actuator) Victim(members []control.Member) (control.Member, error) {
	best, bestOrd := control.Member{}, -1
	for _, m := range members {
		if ord, err := a.ordinal(m.Addr); err == nil && ord > bestOrd {
			best, bestOrd = m, ord
		}
	}
	if bestOrd < 0 {
		return control.Member{}, fmt.Errorf("kubernetes actuator: no member address names a pod of statefulset %s (want host %s-<ordinal>.<service>...)", a.target(), a.cfg.StatefulSet)
	}
	return best, nil
}

// ordinal parses the pod ordinal from a member address.
func (a *Actuator) ordinal(addr string) (int, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if net.ParseIP(host) != nil {
		return 0, fmt.Errorf("kubernetes actuator: member address %s is an IP, not a pod name", addr)
	}
	pod, _, _ := strings.Cut(host, ".")
	rest, ok := strings.CutPrefix(pod, a.cfg.StatefulSet+"-")
	if !ok {
		return 0, fmt.Errorf("kubernetes actuator: member address %s is not a pod of statefulset %s", addr, a.cfg.StatefulSet)
	}
	ord, err := strconv.Atoi(rest)
	if err != nil || ord < 0 || strconv.Itoa(ord) != rest {
		return 0, fmt.Errorf("kubernetes actuator: member address %s has no pod ordinal", addr)
	}
	return ord, nil
}

// Remove lowers replicas to m's ordinal, which removes m's pod and nothing
// else; it refuses unless m is the highest ordinal, so it never deletes a
// pod that has not been drained. If m's ordinal is already at or beyond
// replicas it succeeds without a write.
func (a *Actuator) Remove(ctx context.Context, m control.Member) (string, error) {
	ord, err := a.ordinal(m.Addr)
	if err != nil {
		return "", err
	}
	sets := a.client.AppsV1().StatefulSets(a.cfg.Namespace)
	sc, err := sets.GetScale(ctx, a.cfg.StatefulSet, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("kubernetes actuator: reading the scale of statefulset %s: %w", a.target(), err)
	}
	from := int(sc.Spec.Replicas)
	switch {
	case ord >= from:
		// Already gone: a retry of a Remove whose reply was lost.
		return fmt.Sprintf("kubernetes: node %d (%s) already removed; statefulset %s has %d replicas", m.ID, m.Addr, a.target(), from), nil
	case ord != from-1:
		return "", fmt.Errorf("kubernetes actuator: node %d (%s) is ordinal %d but statefulset %s has %d replicas; only the highest ordinal (%d) may be removed",
			m.ID, m.Addr, ord, a.target(), from, from-1)
	case ord < a.cfg.MinReplicas:
		return "", fmt.Errorf("kubernetes actuator: removing node %d (%s) would leave statefulset %s with %d replicas, below MinReplicas %d",
			m.ID, m.Addr, a.target(), ord, a.cfg.MinReplicas)
	}
	sc.Spec.Replicas = int32(ord)
	if _, err := sets.UpdateScale(ctx, a.cfg.StatefulSet, sc, metav1.UpdateOptions{}); err != nil {
		return "", fmt.Errorf("kubernetes actuator: lowering statefulset %s from %d to %d replicas: %w", a.target(), from, ord, err)
	}
	return fmt.Sprintf("kubernetes: node %d (%s) drained; statefulset %s replicas %d -> %d", m.ID, m.Addr, a.target(), from, ord), nil
}
