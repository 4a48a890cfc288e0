package datadir

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

// ErrIdentity: the data directory belongs to another node, another
// cluster, or a node alone.
var ErrIdentity = errors.New("datadir: the data directory belongs elsewhere")

// maxIDLen bounds a node or cluster id: a node id is a key's last element
// in the cluster's metastore and appears in every assignment.
const maxIDLen = 64

// ValidateNodeID checks a node id: 1 to 64 characters of [A-Za-z0-9._-].
func ValidateNodeID(id string) error {
	if len(id) == 0 || len(id) > maxIDLen {
		return fmt.Errorf("node id %.80q: %d characters, want 1 to %d", id, len(id), maxIDLen)
	}
	for i := range len(id) {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("node id %q: byte %d (0x%02x) is not one of [A-Za-z0-9._-]", id, i, c)
		}
	}
	return nil
}

// NewNodeID returns a random node id: "node-" and 12 hex digits.
func NewNodeID() string {
	var r [6]byte
	rand.Read(r[:]) // never fails (crypto/rand)
	return "node-" + hex.EncodeToString(r[:])
}

// StoredNodeID returns the node id the data directory records, if any.
func StoredNodeID(files vfs.FS, dir string) (id string, ok bool, err error) {
	return storedID(files, dir, wire.NodeIDFileName)
}

// StoredClusterID returns the cluster id the data directory records, if
// any.
func StoredClusterID(files vfs.FS, dir string) (id string, ok bool, err error) {
	return storedID(files, dir, wire.ClusterIDFileName)
}

// RecordNodeID records the node id of the data directory, crash-safely;
// one already recorded must be the same (ErrIdentity).
func RecordNodeID(files vfs.FS, dir, id string) error {
	return recordID(files, dir, wire.NodeIDFileName, id)
}

// RecordClusterID records the cluster id of the data directory as
// RecordNodeID does the node id.
func RecordClusterID(files vfs.FS, dir, id string) error {
	return recordID(files, dir, wire.ClusterIDFileName, id)
}

func storedID(files vfs.FS, dir, name string) (string, bool, error) {
	if files == nil {
		files = vfs.OS{}
	}
	path := filepath.Join(dir, name)
	b, err := vfs.ReadFile(files, path, maxIDLen+2)
	if errors.Is(err, fs.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("datadir: read %s: %w", path, err)
	}
	id := strings.TrimSuffix(string(b), "\n")
	if err := ValidateNodeID(id); err != nil { // a cluster id obeys the same rule
		return "", false, fmt.Errorf("datadir: %s is damaged (%v); write the id it held back into it", path, err)
	}
	return id, true, nil
}

func recordID(files vfs.FS, dir, name, id string) error {
	if files == nil {
		files = vfs.OS{}
	}
	if err := ValidateNodeID(id); err != nil {
		return err
	}
	stored, ok, err := storedID(files, dir, name)
	if err != nil {
		return err
	}
	if ok {
		if stored != id {
			return fmt.Errorf("%w: its %s is %q, not %q", ErrIdentity, name, stored, id)
		}
		return nil
	}
	if err := vfs.WriteFileAtomic(files, filepath.Join(dir, name), []byte(id+"\n")); err != nil {
		return fmt.Errorf("datadir: record the %s: %w", name, err)
	}
	return nil
}
