package runtime

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/wire"
)

// ErrNodeIDMismatch: the data directory belongs to another node id than
// the one asked for.
var ErrNodeIDMismatch = errors.New("runtime: the data directory belongs to another node")

// maxNodeIDLen bounds a node id: it is a key's last element in the
// cluster's metastore and appears in every assignment.
const maxNodeIDLen = 64

// ValidateNodeID checks a node id: 1 to 64 characters of [A-Za-z0-9._-].
func ValidateNodeID(id string) error {
	if len(id) == 0 || len(id) > maxNodeIDLen {
		return fmt.Errorf("node id %.80q: %d characters, want 1 to %d", id, len(id), maxNodeIDLen)
	}
	for i := range len(id) {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("node id %q: byte %d (0x%02x) is not one of [A-Za-z0-9._-]", id, i, c)
		}
	}
	return nil
}

// NodeIDOf returns the node id a data directory belongs to. A directory
// that has one (<dir>/node-id) keeps it: asking for another (want not
// empty) is ErrNodeIDMismatch, so a node never takes a data directory
// holding another node's partitions for its own. A directory without one
// gets want, or a random id ("node-" and 12 hex digits) when want is
// empty, written crash-safely before it is returned. The caller holds the
// data directory's lock.
func NodeIDOf(files vfs.FS, dir, want string) (string, error) {
	if files == nil {
		files = vfs.OS{}
	}
	if want != "" {
		if err := ValidateNodeID(want); err != nil {
			return "", err
		}
	}
	name := filepath.Join(dir, wire.NodeIDFileName)
	b, err := vfs.ReadFile(files, name, maxNodeIDLen+2)
	switch {
	case err == nil:
		stored := strings.TrimSuffix(string(b), "\n")
		if err := ValidateNodeID(stored); err != nil {
			return "", fmt.Errorf("runtime: %s is damaged (%v); if this data directory is node X's, write X into it", name, err)
		}
		if want != "" && want != stored {
			return "", fmt.Errorf("%w: %s belongs to node %q, not %q", ErrNodeIDMismatch, dir, stored, want)
		}
		return stored, nil
	case !errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("runtime: read %s: %w", name, err)
	}
	id := want
	if id == "" {
		var r [6]byte
		if _, err := rand.Read(r[:]); err != nil {
			return "", err
		}
		id = "node-" + hex.EncodeToString(r[:])
	}
	if err := vfs.WriteFileAtomic(files, name, []byte(id+"\n")); err != nil {
		return "", fmt.Errorf("runtime: record the node id: %w", err)
	}
	return id, nil
}
