package tidekvpb

import "github.com/tidekv/tidekv/api/hlc"

// FromHLC is t on the wire.
func FromHLC(t hlc.Timestamp) *Timestamp {
	return &Timestamp{WallNanos: t.WallTime, Logical: t.Logical}
}

// HLC is the timestamp x carries; absent (a sender from before HLC) is the
// zero timestamp.
func (x *Timestamp) HLC() hlc.Timestamp {
	return hlc.Timestamp{WallTime: x.GetWallNanos(), Logical: x.GetLogical()}
}

// OptionalHLC is t on the wire, or nil (absent) for the zero timestamp.
func OptionalHLC(t hlc.Timestamp) *Timestamp {
	if t.IsZero() {
		return nil
	}
	return FromHLC(t)
}
