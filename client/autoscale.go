package client

import (
	"context"

	"github.com/tidekv/tidekv/api/tidekvpb"
)

// AutoscaleStatus returns the elasticity controller's status as JSON (the
// fields of `tidekv ctl autoscale status --json`, docs/elasticity.md). Any
// node answers; it asks the meta leaseholder, where the controller runs.
func (c *Client) AutoscaleStatus(ctx context.Context) ([]byte, error) {
	var resp *tidekvpb.AutoscaleStatusResponse
	err := c.invoke(ctx, &rpc{op: "autoscale-status", anyNode: true, idempotent: true,
		call: func(ctx context.Context, nc *nodeConn) (err error) {
			resp, err = nc.admin.AutoscaleStatus(ctx, &tidekvpb.AutoscaleStatusRequest{})
			return err
		}})
	if err != nil {
		return nil, err
	}
	return []byte(resp.GetJson()), nil
}
