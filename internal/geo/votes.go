package geo

// Votes settle which DCs' inputs an epoch is executed with. A DC votes
// once per (epoch, DC input): "have" when the message reached it, "leave
// out" when its deadline passed first; the message's arrival counts as its
// sender's own "have". An input is in once a majority voted have, out once
// a majority voted to leave it out, and (only possible with an even number
// of DCs) out when every DC voted without a majority.
type votes struct {
	n int
	m map[voteKey][]int8 // per voter: 0 not yet, 1 have, -1 leave out
}

type voteKey struct {
	epoch uint64
	dc    int
}

// Vote is one DC's vote on another's input for an epoch, as carried in
// its messages (the voter is the message's sender).
type Vote struct {
	Epoch uint64
	DC    int
	Have  bool
}

func newVotes(n int) *votes { return &votes{n: n, m: map[voteKey][]int8{}} }

// cast records voter's vote unless it voted already; it says whether it
// was recorded.
func (v *votes) cast(epoch uint64, dc, voter int, have bool) bool {
	k := voteKey{epoch, dc}
	b := v.m[k]
	if b == nil {
		b = make([]int8, v.n)
		v.m[k] = b
	}
	if b[voter] != 0 {
		return false
	}
	b[voter] = -1
	if have {
		b[voter] = 1
	}
	return true
}

// voted says whether voter voted on (epoch, dc).
func (v *votes) voted(epoch uint64, dc, voter int) bool {
	b := v.m[voteKey{epoch, dc}]
	return b != nil && b[voter] != 0
}

// decision says whether (epoch, dc) is settled and if so whether it is in.
func (v *votes) decision(epoch uint64, dc int) (decided, in bool) {
	have, out := 0, 0
	for _, x := range v.m[voteKey{epoch, dc}] {
		switch x {
		case 1:
			have++
		case -1:
			out++
		}
	}
	maj := v.n/2 + 1
	switch {
	case have >= maj:
		return true, true
	case out >= maj, have+out == v.n:
		return true, false
	}
	return false, false
}

// forget drops an epoch's votes once it is validated.
func (v *votes) forget(epoch uint64) {
	for dc := range v.n {
		delete(v.m, voteKey{epoch, dc})
	}
}
