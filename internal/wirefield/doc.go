// Package wirefield reads protobuf wire bytes one field at a time, for
// the hand decoders of the messages a write crosses on its hot path
// (internal/transport's Raft frames, internal/raftstore's commands at
// apply), which decode into arrays of their own instead of one allocation
// per message. It owns no message types; it imports only protowire.
package wirefield
