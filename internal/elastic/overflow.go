package elastic

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/tidekv/tidekv/internal/units"
)

// CacheSpace is one grow-when-full key space as a round sees it.
type CacheSpace struct {
	Name string
	// Capacity is the bytes of the key space one node may hold.
	Capacity uint64
	Ranges   []CacheRange
}

// CacheRange is one range of a cache key space.
type CacheRange struct {
	ID, Generation uint64
	Bytes          uint64
	// Nodes hold its replicas; Busy: an operator runs on it.
	Nodes []uint64
	Busy  bool
}

// OverflowInput is what the overflow policy sees in one round.
type OverflowInput struct {
	Now time.Time
	// Live are the nodes that may receive data (live, not draining).
	Live []uint64
	// Settling: a node asked for has not joined, or a joined one still
	// takes data as a new node; its room is on the way, so no second
	// node is asked for.
	Settling bool
	// Lead is how long a new node takes to serve (Policy.NodeStartTime).
	Lead   time.Duration
	Spaces []CacheSpace
}

// Shed is one step of moving a full node's data away: a split of its
// fullest range at the median (Split), or the move of that range's
// replica From a node To the node with most room.
type Shed struct {
	Range, Generation uint64
	Split             bool
	From, To          uint64
	Bytes             uint64
	Reason            string
}

// OverflowPlan is one round's decisions for the cache key spaces.
type OverflowPlan struct {
	// Launch is why one more node should start now ("": no need).
	Launch string
	// Floor is the fewest nodes that hold every key space at half their
	// capacity or less (the rule's base term): fewer would be near their
	// threshold at once and ask for the node back.
	Floor int
	Sheds []Shed
	// Notes are things an operator should know (a full node with nowhere
	// to shed to), each once until it changes.
	Notes []string
	// Spaces are the key spaces as measured, for status and metrics.
	Spaces []OverflowSpace
}

// OverflowSpace is one key space's threshold and fullest node.
type OverflowSpace struct {
	Name string
	// Capacity and Threshold (T) are bytes per node; Fullest is the node
	// holding most of the key space, Fill what it holds.
	Capacity, Threshold, Fill float64
	Fullest                   uint64
}

// Overflow is the overflow policy's memory across rounds: each key space's
// fill rate and the per-node rates seen within the rate window.
type Overflow struct {
	cfg    OverflowConfig
	spaces map[string]*fillRate
	noted  map[string]string
}

type fillRate struct {
	at      time.Time
	bytes   float64 // the key space's data (each range once)
	rate    float64 // smoothed bytes/s, ≥ 0
	seeded  bool
	samples []rateSample // per-node mean rate, within the window
}

type rateSample struct {
	at   time.Time
	rate float64
}

// NewOverflow starts with no memory.
func NewOverflow(cfg OverflowConfig) *Overflow {
	return &Overflow{cfg: cfg, spaces: map[string]*fillRate{}, noted: map[string]string{}}
}

// SetConfig changes the knobs from the next round.
func (o *Overflow) SetConfig(cfg OverflowConfig) { o.cfg = cfg }

// Round measures the key spaces and decides.
func (o *Overflow) Round(in OverflowInput) OverflowPlan {
	var plan OverflowPlan
	seen := map[string]bool{}
	for _, sp := range in.Spaces {
		seen[sp.Name] = true
		if sp.Capacity == 0 || len(in.Live) == 0 {
			continue
		}
		held, logical := holdings(sp)
		terms := o.measure(sp.Name, in, held, logical, float64(sp.Capacity))
		plan.Floor = max(plan.Floor, floorFor(held, terms.Capacity/2))
		// The fullest node fills fastest (its rate is its share of the
		// key space's), so its T is the lowest: if any node is at its
		// threshold, this one is.
		node, fill := fullest(in.Live, held)
		terms.Rate = o.nodeRate(sp.Name, fill, logical)
		t, raw := Threshold(terms, o.cfg)
		plan.Spaces = append(plan.Spaces, OverflowSpace{Name: sp.Name, Capacity: terms.Capacity, Threshold: t, Fill: fill, Fullest: node})
		if fill >= t && !in.Settling && plan.Launch == "" && !hasRoom(in.Live, held, t) {
			plan.Launch = fmt.Sprintf("pre-launch: key space %q: node %d holds %s, %.0f%% of its %s capacity, at or above %s",
				sp.Name, node, units.Human(uint64(fill)), 100*fill/terms.Capacity, units.Human(sp.Capacity), terms.Explain(t, raw))
		}
		o.shed(sp, in.Live, held, t, &plan)
	}
	for name := range o.spaces {
		if !seen[name] {
			delete(o.spaces, name)
		}
	}
	return plan
}

// holdings is the bytes of the key space each node holds (a range's bytes
// on each replica) and the key space's data counting each range once.
func holdings(sp CacheSpace) (map[uint64]float64, float64) {
	held, logical := map[uint64]float64{}, 0.0
	for _, r := range sp.Ranges {
		logical += float64(r.Bytes)
		for _, n := range r.Nodes {
			held[n] += float64(r.Bytes)
		}
	}
	return held, logical
}

// measure updates the key space's fill rate and returns the rule's terms
// for its average node. The rate is of the data, not of each node's
// holdings: a move in or out changes a node's bytes without anything
// being written, so a node's rate is the key space's rate times its share.
func (o *Overflow) measure(name string, in OverflowInput, held map[uint64]float64, logical, capacity float64) Terms {
	f := o.spaces[name]
	if f == nil {
		f = &fillRate{at: in.Now, bytes: logical}
		o.spaces[name] = f
	}
	// A node at the shed share or above may be evicting (nodes evict from
	// their capacity down to a low-water mark below it), which hides the
	// rate the key space is written at: such rounds keep the rate
	// measured before.
	full := maxOf(held) >= o.cfg.ShedAt*capacity
	if dt := in.Now.Sub(f.at).Seconds(); dt > 0 {
		r := max(0, (logical-f.bytes)/dt)
		switch {
		case full:
		case !f.seeded:
			f.rate, f.seeded = r, true // no ramp from zero: that would read as a low δL
		default:
			f.rate = o.cfg.RateAlpha*r + (1-o.cfg.RateAlpha)*f.rate
		}
		f.at, f.bytes = in.Now, logical
	}
	perNode := o.nodeRate(name, sumOf(held)/float64(len(in.Live)), logical)
	// A round without growth says nothing about how slowly the key space
	// fills: δL is the lowest rate it did fill at.
	if f.seeded && perNode > 0 && !full {
		f.samples = append(f.samples, rateSample{at: in.Now, rate: perNode})
	}
	for len(f.samples) > 0 && in.Now.Sub(f.samples[0].at) > o.cfg.RateWindow {
		f.samples = f.samples[1:]
	}
	t := Terms{Capacity: capacity, Nodes: len(in.Live), Rate: perNode, Low: perNode, High: perNode, Lead: in.Lead}
	for _, s := range f.samples {
		t.Low, t.High = min(t.Low, s.rate), max(t.High, s.rate)
	}
	t.Low = max(t.Low, o.cfg.MinRate)
	return t
}

// nodeRate is the fill rate of a node holding held bytes of a key space
// with logical bytes of data.
func (o *Overflow) nodeRate(name string, held, logical float64) float64 {
	f := o.spaces[name]
	if f == nil || logical <= 0 {
		return 0
	}
	return f.rate * held / logical
}

// floorFor is the fewest nodes that hold held at t each or less.
func floorFor(held map[uint64]float64, t float64) int {
	if t <= 0 {
		return 0
	}
	n := sumOf(held) / t
	if n == float64(int(n)) {
		return int(n)
	}
	return int(n) + 1
}

// fullest is the live node holding most of the key space (lowest ID on a
// tie, so the choice is deterministic).
func fullest(live []uint64, held map[uint64]float64) (uint64, float64) {
	var node uint64
	fill := -1.0
	for _, n := range sortedIDs(live) {
		if held[n] > fill {
			node, fill = n, held[n]
		}
	}
	return node, fill
}

// hasRoom reports whether a live node holds less than half the threshold:
// one that has room for what the full node sheds, so starting another
// would only add an idle node.
func hasRoom(live []uint64, held map[uint64]float64, t float64) bool {
	for _, n := range live {
		if held[n] < t/2 {
			return true
		}
	}
	return false
}

func maxOf(m map[uint64]float64) float64 {
	most := 0.0
	for _, v := range m {
		most = max(most, v)
	}
	return most
}

func sumOf(m map[uint64]float64) float64 {
	s := 0.0
	for _, v := range m {
		s += v
	}
	return s
}

func sortedIDs(ids []uint64) []uint64 {
	s := slices.Clone(ids)
	slices.Sort(s)
	return s
}

// shed plans one step for each node at ShedAt or above, and for each
// node at the threshold t while a node holds under t/2 (the rule asks for
// no new node then: that node's room is to be used, before anyone fills):
// move its biggest range that may move whole (at most MaxMoveShare of the
// capacity) to the live node with most room (for an early step, one that
// stays under t with it, so data never moves back); with none, split its
// fullest range at the median, which makes one. Moving first relieves the
// node at once; splits prepare later moves. A node with an operator
// running on the key space waits for it, so a round never sheds twice
// what it must.
func (o *Overflow) shed(sp CacheSpace, live []uint64, held map[uint64]float64, t float64, plan *OverflowPlan) {
	c := float64(sp.Capacity)
	busy, taken := map[uint64]bool{}, map[uint64]bool{}
	for _, r := range sp.Ranges {
		for _, n := range r.Nodes {
			busy[n] = busy[n] || r.Busy
		}
	}
	early := hasRoom(live, held, t)
	maxMove := o.cfg.MaxMoveShare * c
	for _, n := range sortedIDs(live) {
		key := fmt.Sprintf("%s/%d", sp.Name, n)
		full := held[n] >= o.cfg.ShedAt*c
		if !full && !(early && held[n] >= t) || busy[n] {
			delete(o.noted, key)
			continue
		}
		head := fmt.Sprintf("key space %q: node %d holds %s, %.0f%% of its %s capacity (shed at %.0f%%)",
			sp.Name, n, units.Human(uint64(held[n])), 100*held[n]/c, units.Human(sp.Capacity), 100*o.cfg.ShedAt)
		limit := o.cfg.ShedAt * c
		if !full {
			head = fmt.Sprintf("key space %q: node %d holds %s, at or above T = %s, while a node holds under T/2",
				sp.Name, n, units.Human(uint64(held[n])), units.Human(uint64(t)))
			limit = t
		}
		if r, ok := fullestRange(sp, n, taken, maxMove); ok {
			if to, ok := roomiest(live, held, r, float64(r.Bytes), limit); ok {
				delete(o.noted, key)
				taken[r.ID] = true
				held[n] -= float64(r.Bytes)
				held[to] += float64(r.Bytes)
				plan.Sheds = append(plan.Sheds, Shed{Range: r.ID, From: n, To: to, Bytes: r.Bytes,
					Reason: fmt.Sprintf("%s: moves its biggest range that moves whole (%s) to node %d, which holds %s", head, units.Human(r.Bytes), to, units.Human(uint64(held[to]-float64(r.Bytes))))})
				continue
			}
		}
		if r, ok := fullestRange(sp, n, taken, math.Inf(1)); ok && float64(r.Bytes) > maxMove {
			taken[r.ID] = true
			plan.Sheds = append(plan.Sheds, Shed{Range: r.ID, Generation: r.Generation, Split: true, From: n,
				Reason: fmt.Sprintf("%s: split its fullest range (%s, above %.1f%% of capacity) at the median", head, units.Human(r.Bytes), 100*o.cfg.MaxMoveShare)})
			continue
		}
		if full && o.noted[key] != "full" {
			o.noted[key] = "full"
			plan.Notes = append(plan.Notes, head+": no node has room for its ranges; it evicts if it reaches its capacity before a new node joins")
		}
	}
}

// fullestRange is the biggest idle range of the key space with a replica
// on node n and at most most bytes (lowest ID on a tie).
func fullestRange(sp CacheSpace, n uint64, taken map[uint64]bool, most float64) (CacheRange, bool) {
	var best CacheRange
	found := false
	for _, r := range sp.Ranges {
		if r.Busy || taken[r.ID] || !slices.Contains(r.Nodes, n) || float64(r.Bytes) > most {
			continue
		}
		if !found || r.Bytes > best.Bytes || r.Bytes == best.Bytes && r.ID < best.ID {
			best, found = r, true
		}
	}
	return best, found
}

// roomiest is the live node without a replica of r that holds least and
// stays at or below limit with r: the shedding node is at the limit or
// above, so the range never goes to a node fuller than the one it left.
func roomiest(live []uint64, held map[uint64]float64, r CacheRange, bytes, limit float64) (uint64, bool) {
	var to uint64
	least := -1.0
	for _, n := range sortedIDs(live) {
		if slices.Contains(r.Nodes, n) || held[n]+bytes > limit {
			continue
		}
		if least < 0 || held[n] < least {
			to, least = n, held[n]
		}
	}
	return to, least >= 0
}
