// Package tidekvpb is the generated protobuf and gRPC code of TideKV's API
// (api/gen.sh from api/tidekv.proto and api/storage.proto), plus hlc.go,
// which puts api/hlc timestamps on the wire and back.
//
// It imports nothing under internal/ (internal/lint): the client and the nodes both build on it.
package tidekvpb
