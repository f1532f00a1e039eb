package server

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/tidekv/tidekv/internal/control"
)

// Any node answers the autoscale status (forwarded to the meta
// leaseholder): the live nodes and the migration allowance in force, and
// autoscaling reported as disabled while no elasticity policy runs.
func TestAutoscaleStatus(t *testing.T) {
	tc := startCluster(t, 3)
	c := tc.client()
	tc.waitReplicated(c, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var st control.AutoscaleStatus
	deadline := time.Now().Add(5 * time.Second)
	for {
		raw, err := c.AutoscaleStatus(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, &st); err != nil {
			t.Fatalf("status is not JSON: %v: %s", err, raw)
		}
		if st.Nodes == 3 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if st.Enabled || st.Nodes != 3 || st.TargetNodes != 3 || st.MigrationBytesPerSec != control.DefaultRunnerConfig().MigrationRate {
		t.Fatalf("status %+v", st)
	}
}
