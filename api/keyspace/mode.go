package keyspace

// Mode says how a key space places its keys.
type Mode string

const (
	// Ordered keeps keys in their order: scans work, a range is an
	// interval of keys.
	Ordered Mode = "ordered"
	// Hashed places keys by a hash of the key: load and size spread over
	// ranges whatever the keys look like, and a range is an interval of
	// hash values; scans have no order to follow and are refused.
	Hashed Mode = "hashed"
)

// DefaultMode is the mode of the default key space and of a new key space
// whose mode is not given.
const DefaultMode = Ordered

// DefaultName is the default key space's name.
const DefaultName = "default"

// ModeOf reads a mode as the admin API carries it: unset is DefaultMode.
// It does not validate (internal/ksconfig does).
func ModeOf(s string) Mode {
	if s == "" {
		return DefaultMode
	}
	return Mode(s)
}

// StagingName is the name a restore's key space has until it is published
// (docs/backup.md): no key space can be created under it, since names
// have no '~', so no reader asks for it by chance.
func StagingName(name string) string { return name + "~restoring" }
