package cachebench

import "testing"

// The paper's node count at the end of its run shares the nodes axis with
// ours, at the last step, for the rates it reports; other rates draw none.
func TestFig3ChartPaperNodes(t *testing.T) {
	cfg := DefaultFig3Config()
	cfg.Steps, cfg.BucketSteps = 100, 50
	runs := []Fig3Run{
		{Rate: 255, Variant: "elastic", MissRate: []float64{0.9, 0.5}, Nodes: []int{2, 3}},
		{Rate: 100, Variant: "elastic", MissRate: []float64{0.9, 0.5}, Nodes: []int{2, 3}},
	}
	nodes := Fig3Chart(cfg, 255, runs).Panels[1]
	if !nodes.Integer || len(nodes.Series) != 2 {
		t.Fatalf("nodes panel %+v", nodes)
	}
	ref := nodes.Series[1]
	if !ref.Reference || len(ref.Points) != 1 || ref.Points[0].X != 100 || ref.Points[0].Y != 15 || ref.Name != "growing cache at the end, Fig. 3(b)" {
		t.Errorf("paper's series %+v", ref)
	}
	for _, s := range Fig3Chart(cfg, 100, runs).Panels[1].Series {
		if s.Reference {
			t.Errorf("a paper series at a rate the paper did not run: %+v", s)
		}
	}
}
