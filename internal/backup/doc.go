// Package backup writes a consistent copy of a cluster's data to a
// directory and loads it back (docs/backup.md).
//
// Backup reads every key of the default key space and of every named key
// space at one timestamp, which its Source holds protected from GC while
// it reads (a protected timestamp, renewed), page by page, into data files
// of bounded size, and writes MANIFEST.json last, atomically: a directory
// without a manifest is an incomplete backup. Restore verifies the manifest
// and every data file (size, SHA-256, framing, order, counts) before it
// writes anything through a Sink, then recreates the named key spaces
// staged (under their staging names), writes the pairs in bounded batches,
// and publishes the staged key spaces in one change, so readers find each
// absent or whole.
//
// Source and Sink keep the cluster behind small interfaces; ClientSource and
// ClientSink implement them over *client.Client, and the tests use an
// in-memory twin.
package backup
