package raftstore

import (
	"log"
	"os"

	"go.etcd.io/raft/v3"
)

// raftLogger keeps etcd raft's warnings and errors and drops its chatty
// info and debug lines, which would flood a node's log with one line per
// election per range.
var raftLogger raft.Logger = &quietLogger{l: log.New(os.Stderr, "raft: ", log.LstdFlags)}

type quietLogger struct{ l *log.Logger }

func (q *quietLogger) Debug(...any)                {}
func (q *quietLogger) Debugf(string, ...any)       {}
func (q *quietLogger) Info(...any)                 {}
func (q *quietLogger) Infof(string, ...any)        {}
func (q *quietLogger) Warning(v ...any)            { q.l.Print(v...) }
func (q *quietLogger) Warningf(f string, v ...any) { q.l.Printf(f, v...) }
func (q *quietLogger) Error(v ...any)              { q.l.Print(v...) }
func (q *quietLogger) Errorf(f string, v ...any)   { q.l.Printf(f, v...) }
func (q *quietLogger) Fatal(v ...any)              { q.l.Fatal(v...) }
func (q *quietLogger) Fatalf(f string, v ...any)   { q.l.Fatalf(f, v...) }
func (q *quietLogger) Panic(v ...any)              { q.l.Panic(v...) }
func (q *quietLogger) Panicf(f string, v ...any)   { q.l.Panicf(f, v...) }
