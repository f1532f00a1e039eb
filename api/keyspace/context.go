package keyspace

import "context"

type nameKey struct{}

// WithName marks the requests made with ctx as requests of key space name
// (their keys already mapped by its Codec): the Go client's key space view
// and the Redis front end's databases do, and the client puts the name in
// each request's keyspace field.
func WithName(ctx context.Context, name string) context.Context {
	if name == "" || name == DefaultName {
		return ctx
	}
	return context.WithValue(ctx, nameKey{}, name)
}

// NameFrom is the key space name WithName put in ctx ("" for the default).
func NameFrom(ctx context.Context) string {
	s, _ := ctx.Value(nameKey{}).(string)
	return s
}
