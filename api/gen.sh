#!/usr/bin/env bash
# Regenerates api/tidekvpb from api/tidekv.proto. Needs protoc (Debian:
# protobuf-compiler) and the Go plugins; installs the plugins if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$(go env GOPATH)/bin:$PATH"
command -v protoc-gen-go >/dev/null || go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
command -v protoc-gen-go-grpc >/dev/null || go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2
raftdir="$(go list -m -f '{{.Dir}}' go.etcd.io/raft/v3)"
protoc -I api -I "$raftdir" \
  --go_out=api/tidekvpb --go_opt=paths=source_relative \
  --go-grpc_out=api/tidekvpb --go-grpc_opt=paths=source_relative \
  --go_opt=Mraftpb/raft.proto=go.etcd.io/raft/v3/raftpb \
  --go-grpc_opt=Mraftpb/raft.proto=go.etcd.io/raft/v3/raftpb \
  api/tidekv.proto api/storage.proto
