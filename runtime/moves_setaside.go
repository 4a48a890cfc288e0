package runtime

// Setting a partition's copy aside. A cluster's node that was marked lost,
// and whose partitions an operator reassigned to other nodes while it was
// away, may hold acked records the new owners never had: its copy is never
// removed, only moved out of topics/ into <data dir>/lost/, which the node
// never opens, sweeps or removes, with the topic's dictionary files beside
// it. What is there is the operator's.

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	"github.com/narad-io/storage/codec"
	"github.com/narad-io/storage/partition"
	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/wire"
	"go.uber.org/zap"
)

// setAsideUnknownIncarnation stands for the incarnation in the name of a
// set-aside copy whose topic directory's marker (and its copy) could not
// be read.
const setAsideUnknownIncarnation = "unknown"

// setAsideNameTries bounds the names tried for one set-aside copy: the
// time's, then the time's with -1, -2, ... appended.
const setAsideNameTries = 1000

// SetAsidePartition moves this node's copy of a partition the metastore no
// longer assigns it (reassigned while the node was marked lost) out of
// the served tree, to <data dir>/lost/<topic>.<incarnation>/pNNNNN.<unix
// ms> (<incarnation> "unknown" when the marker does not read; -1, -2, ...
// appended when the name is taken), for an operator to recover what it
// may hold that the new owner never had. A partition assigned to this
// node is refused (ErrAssigned), one being received too
// (ErrReceiveInProgress). It returns the copy's new path: "" and nil when
// the partition has no directory here; after an error, where the copy
// was renamed to, if it was, not yet durable. The steps and their crash
// argument are runtime/doc.go's "Drop and set aside".
func (n *Node) SetAsidePartition(ctx context.Context, topic string, p int) (string, error) {
	key, err := n.key(topic, p)
	if err != nil {
		return "", err
	}
	moved := ""
	err = n.releasePartition(ctx, key, func(paths installPaths) error {
		exists, err := vfs.Exists(n.cfg.FS, paths.final)
		if err != nil {
			return fmt.Errorf("stat %s: %w", paths.final, err)
		}
		if !exists {
			return nil
		}
		incarnation := setAsideUnknownIncarnation
		if id, err := n.readMarker(paths.topicDir); err == nil {
			incarnation = string(id)
		}
		parent := filepath.Join(n.cfg.DataDir, wire.LostDirName, key.Topic+"."+incarnation)
		if err := vfs.MkdirAllDurable(n.cfg.FS, parent); err != nil {
			return err
		}
		if err := n.setAsideDictionaries(key.Topic, paths.topicDir, parent); err != nil {
			return err
		}
		dest, err := n.freeSetAsideName(parent, filepath.Base(paths.final)+"."+strconv.FormatInt(time.Now().UnixMilli(), 10))
		if err != nil {
			return err
		}
		if err := n.cfg.FS.Rename(paths.final, dest); err != nil {
			return err
		}
		moved = dest
		if err := n.cfg.FS.SyncDir(paths.topicDir); err != nil {
			return fmt.Errorf("moved %s to %s: sync %s: %w", paths.final, dest, paths.topicDir, err)
		}
		if err := n.cfg.FS.SyncDir(parent); err != nil {
			return fmt.Errorf("moved %s to %s: sync %s: %w", paths.final, dest, parent, err)
		}
		return nil
	})
	if err != nil {
		return moved, fmt.Errorf("set aside %s/%d: %w", topic, p, err)
	}
	if moved != "" {
		n.logger.Warn("set aside this node's copy of a partition reassigned while it was lost",
			zap.String("topic", topic), zap.Int("partition", p), zap.String("path", moved))
	}
	return moved, nil
}

// setAsideDictionaries stores in parent, durably, each of the topic's
// dictionary files in topicDir that checks out, so the set-aside copy's
// frames decode there (inspect reads a segment's dictionaries two
// directories up) after the topic directory is gone. A damaged file is
// logged and left (its frames were damage already); a file in parent with
// other bytes under the id (a copy of another incarnation set aside as
// "unknown") is logged and kept, never overwritten.
func (n *Node) setAsideDictionaries(topic, topicDir, parent string) error {
	set, infos, bad, err := partition.ReadDictionaryFiles(n.cfg.FS, topicDir)
	if err != nil {
		return err
	}
	for _, b := range bad {
		n.logger.Error("dictionary file damaged; not set aside with the copy", zap.String("topic", topic), zap.String("file", b.Name), zap.Error(b.Err))
	}
	for _, info := range infos {
		err := partition.StoreDictionaryFile(n.cfg.FS, parent, set.Lookup(info.ID), info.TrainedAtMs)
		if errors.Is(err, codec.ErrDictionaryConflict) || errors.Is(err, partition.ErrDictionaryFileDamaged) {
			// lost/ is the operator's: what is there never blocks moving
			// the copy out of the served tree.
			n.logger.Error("a set-aside place holds another or a damaged dictionary under the id; the copy's is not set aside", zap.String("topic", topic), zap.String("dir", parent), zap.Uint32("id", info.ID), zap.Error(err))
			continue
		}
		if err != nil {
			return fmt.Errorf("set aside dictionary %d: %w", info.ID, err)
		}
	}
	return nil
}

// freeSetAsideName returns the first path in parent, of base, then base-1,
// base-2, ..., that nothing holds. The caller holds the topic's guard, and
// parent holds one topic's copies only, so no other set-aside takes the
// name before the rename.
func (n *Node) freeSetAsideName(parent, base string) (string, error) {
	for try := range setAsideNameTries {
		name := base
		if try > 0 {
			name = base + "-" + strconv.Itoa(try)
		}
		path := filepath.Join(parent, name)
		taken, err := vfs.Exists(n.cfg.FS, path)
		if err != nil {
			return "", fmt.Errorf("stat %s: %w", path, err)
		}
		if !taken {
			return path, nil
		}
	}
	return "", fmt.Errorf("no free name for a set-aside copy in %s: %s and %d more taken", parent, base, setAsideNameTries-1)
}
