// Package backup writes a consistent copy of a cluster's data to a
// directory and loads it back (docs/backup.md).
//
// Backup reads every key of the default key space and of every named key
// space at one timestamp, page by page, through a Source, into data files
// of bounded size, and writes MANIFEST.json last, atomically: a directory
// without a manifest is an incomplete backup. Restore verifies the manifest
// and every data file (size, SHA-256, framing, order, counts) before it
// writes anything through a Sink, then recreates the named key spaces and
// writes the pairs in bounded batches.
//
// Source and Sink keep the cluster behind small interfaces; ClientSource and
// ClientSink implement them over *client.Client, and the tests use an
// in-memory twin.
package backup
