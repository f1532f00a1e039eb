package ksconfig

import (
	"github.com/tidekv/tidekv/api/keyspace"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/memengine"
)

// FromAPI reads a key space from its admin API message; unset mode and
// engine take their defaults.
func FromAPI(k *tidekvpb.KeySpace) KeySpace {
	s := DefaultSettings()
	s.Name = k.GetName()
	s.Mode = keyspace.ModeOf(k.GetMode())
	if k.GetEngine() != "" {
		s.Engine = Engine(k.GetEngine())
	}
	s.Index = memengine.Index(k.GetIndex())
	if s.Engine == Memory && s.Index == "" {
		s.Index = memengine.DefaultConfig().Index
	}
	s.RF, s.CapacityPerNode = int(k.GetRf()), k.GetCapacityPerNode()
	s.TTL = time.Duration(k.GetTtlMs()) * time.Millisecond
	s.MissHandler = k.GetMissHandler()
	s.GCTTL = time.Duration(k.GetGcTtlMs()) * time.Millisecond
	if k.GetOnFull() != "" {
		s.OnFull = OnFull(k.GetOnFull())
	}
	return KeySpace{ID: keyspace.ID(k.GetId()), Settings: s}
}

// ToAPI is a key space's admin API message (its settings and number).
func ToAPI(k KeySpace) *tidekvpb.KeySpace {
	return &tidekvpb.KeySpace{Id: uint32(k.ID), Name: k.Name, Mode: string(k.Mode), Engine: string(k.Engine), Index: string(k.Index), Rf: uint32(k.RF),
		CapacityPerNode: k.CapacityPerNode, TtlMs: k.TTL.Milliseconds(), MissHandler: k.MissHandler, OnFull: string(k.OnFull),
		GcTtlMs: k.GCTTL.Milliseconds()}
}
