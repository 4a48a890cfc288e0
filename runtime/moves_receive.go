package runtime

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/narad-io/storage/supervisor"
	"github.com/narad-io/storage/wire"
)

// Receiver takes in a moved partition as its files arrive, streamed (a
// file is never held whole in memory), and installs it in place of
// whatever the partition's directory holds at Commit. The files go to the
// partition's staging directory (<p>.installing): never complete, so a
// crash before the Commit leaves the partition as it was, and the next
// start removes the staging directory. Commit renames it complete
// (<p>.install) and swaps it in: from that rename on, a crash rolls the
// install forward (settleInstall). It is atomic across a crash: at every
// crash point the partition is either the old directory or the new one,
// never neither (doc.go, "Protocols").
//
// One receive of a partition runs at a time (a second is
// ErrReceiveInProgress until the first's Commit or Abort), and nothing of
// it is served before Commit. Files are written outside every
// lock; Commit holds the produce gate exclusive and the topic's guard from
// the close of the live log to the final directory sync, so no produce and
// no lazy reopen reaches the old directory while it is replaced.
//
// Invariants: ended is set by Commit or Abort, after which nothing is
// written; every file written was synced before WriteFile returned.
type Receiver struct {
	n           *Node
	key         supervisor.Key
	incarnation wire.IncarnationID
	paths       installPaths
	ended       bool
	// mineAtStart: the metastore assigned this node the partition when the
	// receive began (a node alone, whose metastore assigns it everything).
	// A receive that began for another node's partition never installs
	// over one assigned here since: this node may be serving it, and the
	// install would replace what it acked (found by review: a lost node's
	// partition given, empty, to the node still pulling it).
	mineAtStart bool
}

// ErrReceiveEnded: a Receiver was used after its Commit or Abort.
var ErrReceiveEnded = errors.New("runtime: the partition receive has ended")

// ReceivePartition starts receiving a moved partition of the topic's
// incarnation (ErrStaleIncarnation if the record has another). Under the
// topic's guard it checks (or stamps) the topic directory's incarnation
// marker, settles what an earlier install left, and makes the staging
// directory afresh.
func (n *Node) ReceivePartition(ctx context.Context, topic string, p int, incarnation wire.IncarnationID) (*Receiver, error) {
	key, err := n.key(topic, p)
	if err != nil {
		return nil, err
	}
	r := &Receiver{n: n, key: key, incarnation: incarnation, paths: n.installPathsOf(key)}
	if _, busy := n.receiving.LoadOrStore(key, r); busy {
		// Two receives would share the staging directory, each removing
		// or committing the other's files (found by review).
		return nil, fmt.Errorf("%w: %s/%d", ErrReceiveInProgress, topic, p)
	}
	if _, err := r.record(ctx); err != nil {
		n.receiving.CompareAndDelete(key, r)
		return nil, fmt.Errorf("receive %s/%d: %w", topic, p, err)
	}
	err = n.withTopic(topic, func(t *supervisor.GuardedTopic) error {
		rec, err := r.record(ctx) // again under the guard: a delete and recreate may have come between
		if err != nil {
			return err
		}
		if err := n.checkIncarnation(t, rec); err != nil {
			return err
		}
		if r.mineAtStart, err = n.ms.Assigned(ctx, topic, p); err != nil {
			return err
		}
		if err := n.settleInstall(key); err != nil { // removes a leftover staging directory
			return err
		}
		// Not synced: a staging directory a crash loses held nothing
		// installed; Commit syncs it, and its rename, before the swap.
		return n.cfg.FS.Mkdir(r.paths.installing)
	})
	if err != nil {
		n.receiving.CompareAndDelete(key, r)
		return nil, fmt.Errorf("receive %s/%d: %w", topic, p, nodeClosedError(err))
	}
	return r, nil
}

// AssignedAtStart reports whether the metastore assigned this node the
// partition when the receive began: a node alone's receive, or, in a
// cluster, a pull for a partition this node owns already, which its
// caller must not install (Commit only refuses a partition assigned since
// the receive began).
func (r *Receiver) AssignedAtStart() bool { return r.mineAtStart }

// ErrReceiveInProgress: a receive of the partition is under way already.
var ErrReceiveInProgress = errors.New("runtime: a receive of the partition is under way")

// record reads the topic's record and checks it is the incarnation
// received.
func (r *Receiver) record(ctx context.Context) (TopicRecord, error) {
	rec, ok, err := r.n.ms.Topic(ctx, r.key.Topic)
	if err != nil {
		return rec, err
	}
	if !ok || r.key.Partition >= rec.Partitions {
		return rec, fmt.Errorf("%w: %s/%d", ErrPartitionNotFound, r.key.Topic, r.key.Partition)
	}
	if rec.Incarnation != r.incarnation {
		return rec, fmt.Errorf("%w: receiving incarnation %s of %s, the record has %q", ErrStaleIncarnation, r.incarnation, r.key.Topic, rec.Incarnation)
	}
	return rec, nil
}

// WriteFile writes one file of the partition, exactly size bytes read
// from src, and syncs it: a segment, the hwm file, a cursor's position
// (8 bytes, as consumer.offset; one that does not decode is refused; the
// file is written in the cursor file's format), or a queue consumer's progress file (checked when the
// consumer recovers, as after a crash). A file of that name already written is an error.
func (r *Receiver) WriteFile(name string, size int64, src io.Reader) (err error) {
	if r.ended {
		return ErrReceiveEnded
	}
	if err := checkInstallFile(name, size); err != nil {
		return fmt.Errorf("receive %s/%d: %w", r.key.Topic, r.key.Partition, err)
	}
	if id, err := wire.ParseDictionaryFileName(name); err == nil {
		return r.n.receiveDictionary(r.key.Topic, r.incarnation, id, size, src)
	}
	if _, ok := wire.ParseCursorFileName(name); ok {
		var b [wire.OffsetFileSize]byte
		if _, err := io.ReadFull(src, b[:]); err != nil {
			return fmt.Errorf("receive %s/%d: cursor file %q: %w", r.key.Topic, r.key.Partition, name, err)
		}
		pos, _, err := wire.DecodeOffsetFile(b[:])
		if err != nil {
			return fmt.Errorf("receive %s/%d: cursor file %q is not a position: %w", r.key.Topic, r.key.Partition, name, err)
		}
		content, err := wire.EncodeCursorFile(pos) // written in the cursor file's own format
		if err != nil {
			return err
		}
		src, size = bytes.NewReader(content), int64(len(content))
	}
	f, err := r.n.cfg.FS.OpenFile(filepath.Join(r.paths.installing, name), os.O_WRONLY|os.O_CREATE|os.O_EXCL)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	buf := make([]byte, min(max(size, 1), receiveBufferBytes)) // CopyBuffer takes no empty buffer, even for an empty file
	copied, err := io.CopyBuffer(onlyWriter{f}, io.LimitReader(src, size), buf)
	if err != nil {
		return fmt.Errorf("receive %s/%d: %s: %w", r.key.Topic, r.key.Partition, name, err)
	}
	if copied != size {
		return fmt.Errorf("receive %s/%d: %s: %d of its %d bytes arrived: %w", r.key.Topic, r.key.Partition, name, copied, size, io.ErrUnexpectedEOF)
	}
	return f.Sync()
}

// Remove takes back a segment written (one the sender's retention
// deleted before its final listing). A name never written is nothing to
// do.
func (r *Receiver) Remove(name string) error {
	if r.ended {
		return ErrReceiveEnded
	}
	if _, err := wire.ParseSegmentFileName(name); err != nil {
		return fmt.Errorf("receive %s/%d: only a segment is taken back, not %q", r.key.Topic, r.key.Partition, name)
	}
	err := r.n.cfg.FS.Remove(filepath.Join(r.paths.installing, name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err // the directory is synced at the Commit
}

// receiveBufferBytes is the copy buffer of a received file.
const receiveBufferBytes = 1 << 20

// onlyWriter hides a file's other methods from io.CopyBuffer, so the copy
// goes through the buffer (and the file system seam's Write) whatever
// the file implements.
type onlyWriter struct{ w io.Writer }

func (o onlyWriter) Write(b []byte) (int, error) { return o.w.Write(b) }

// Commit installs the received files in place of the partition's
// directory. A partition the metastore has assigned this node since the
// receive began is refused (ErrAssigned): this node may serve it. The
// topic's record must still be the incarnation received
// (checked again under the guard: a delete and recreate meanwhile must
// refuse the install, never let the old record quarantine the live
// incarnation's directory). The boundary, the consumer state and the
// cursors' positions are the installed files' from then on: the leases
// held on the partition go. Once the staging directory is complete the
// install is completed even if a later step fails: the error is
// returned, and the next open of the partition (or the next start)
// finishes it.
func (r *Receiver) Commit(ctx context.Context) error {
	if r.ended {
		return ErrReceiveEnded
	}
	r.ended = true
	n, key, paths := r.n, r.key, r.paths
	defer n.receiving.CompareAndDelete(key, r)
	err := n.reg.WithPartitionClosed(key, func(t *supervisor.GuardedTopic) error {
		rec, err := r.record(ctx)
		if err != nil {
			return errors.Join(err, r.removeStaging())
		}
		if err := n.checkIncarnation(t, rec); err != nil {
			return errors.Join(err, r.removeStaging())
		}
		if !r.mineAtStart {
			if mine, err := n.ms.Assigned(ctx, key.Topic, key.Partition); err != nil || mine {
				return errors.Join(fmt.Errorf("%w since the receive began: %s/%d", ErrAssigned, key.Topic, key.Partition), err, r.removeStaging())
			}
		}
		if err := n.cfg.FS.SyncDir(paths.installing); err != nil {
			return err
		}
		n.marks.forget(key)
		n.cursors.forget(ofPartition(key))
		n.queues.forget(func(k supervisor.Key) bool { return k == key })
		// From this rename on the staging directory is complete and a
		// crash rolls it forward; whatever fails from here on is settled
		// the same way before the partition is opened or described again
		// (settleBeforeOpen).
		n.installs.mark(key)
		if err := n.cfg.FS.Rename(paths.installing, paths.install); err != nil {
			return err
		}
		if err := n.cfg.FS.SyncDir(paths.topicDir); err != nil {
			return err
		}
		return n.settleInstall(key) // on failure the partition stays unsettled
	})
	if err != nil {
		return fmt.Errorf("install %s/%d: %w", key.Topic, key.Partition, nodeClosedError(err))
	}
	return nil
}

// Abort ends the receive without installing anything: the staging
// directory is removed (a failure to is left to the next receive or
// start).
func (r *Receiver) Abort() error {
	if r.ended {
		return nil
	}
	r.ended = true
	defer r.n.receiving.CompareAndDelete(r.key, r)
	return r.n.withTopic(r.key.Topic, func(*supervisor.GuardedTopic) error { return r.removeStaging() })
}

// removeStaging removes the staging directory; the caller holds the
// topic's guard.
func (r *Receiver) removeStaging() error {
	if err := r.n.cfg.FS.RemoveAll(r.paths.installing); err != nil {
		return err
	}
	return r.n.cfg.FS.SyncDir(r.paths.topicDir)
}
