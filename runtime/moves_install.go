package runtime

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"

	"github.com/narad-io/storage/supervisor"
	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/wire"
	"go.uber.org/zap"
)

// InstallFile is one file of a moved partition: a segment, the hwm file,
// or a fan-out cursor's position file (wire.CursorFileName; Data is the
// position in 8 bytes, as consumer.offset, written as a cursor file).
type InstallFile struct {
	Name string
	Data []byte
}

// InstallPartition installs a moved partition in place of whatever the
// partition's directory holds, from files held in memory: a
// ReceivePartition, a WriteFile of each file, and the Commit
// (moves_receive.go), so it is atomic across a crash as they are. Only
// segment files, the hwm file, cursor position files and the queue
// consumer's progress files are accepted; a moved partition's marker is
// the record's.
func (n *Node) InstallPartition(ctx context.Context, topic string, p int, incarnation wire.IncarnationID, files []InstallFile) error {
	for _, f := range files {
		if err := checkInstallFile(f.Name, int64(len(f.Data))); err != nil {
			return fmt.Errorf("install %s/%d: %w", topic, p, err)
		}
	}
	r, err := n.ReceivePartition(ctx, topic, p, incarnation)
	if err != nil {
		return err
	}
	for _, f := range files {
		if err := r.WriteFile(f.Name, int64(len(f.Data)), bytes.NewReader(f.Data)); err != nil {
			return errors.Join(err, r.Abort())
		}
	}
	return r.Commit(ctx)
}

// checkInstallFile checks a moved partition's file by its name and size:
// a segment, the hwm file, a cursor's 8-byte position file, or a queue
// consumer's progress file.
func checkInstallFile(name string, size int64) error {
	if _, err := wire.ParseDictionaryFileName(name); err == nil {
		if size < wire.DictionaryFileHeaderSize || size > wire.DictionaryFileHeaderSize+wire.MaxDictionaryFileBytes {
			return fmt.Errorf("dictionary file %q of %d bytes", name, size)
		}
		return nil
	}
	if _, ok := wire.ParseCursorFileName(name); ok {
		if size != wire.OffsetFileSize {
			return fmt.Errorf("cursor file %q is not an 8-byte position", name)
		}
		return nil
	}
	limit, consumer := consumerFileLimit(name) // its content checked when the queue reads it
	if name == wire.HWMFileName {
		limit, consumer = wire.OffsetFileSize, true
	}
	if consumer {
		if size > limit {
			return fmt.Errorf("%s file of %d bytes", name, size)
		}
		return nil
	}
	if _, err := wire.ParseSegmentFileName(name); err != nil {
		return fmt.Errorf("%q is not a segment, hwm or cursor file", name)
	}
	if size < 0 {
		return fmt.Errorf("segment %q of %d bytes", name, size)
	}
	return nil
}

// installPaths names the directories of one partition's install.
type installPaths struct {
	topicDir   string
	final      string // the partition's directory
	installing string // staging, being written: never complete
	install    string // staging, every file durable: complete
	replaced   string // the old directory, while the new one takes its name
	dropped    string // the directory of a partition dropped, while it is removed
}

func (n *Node) installPathsOf(key supervisor.Key) installPaths {
	dirName, _ := wire.PartitionDirName(key.Partition)
	topicDir := filepath.Join(n.topicsDir, key.Topic)
	final := filepath.Join(topicDir, dirName)
	return installPaths{topicDir: topicDir, final: final,
		installing: final + wire.InstallingDirSuffix, install: final + wire.InstallDirSuffix, replaced: final + wire.ReplacedDirSuffix,
		dropped: final + wire.DroppedDirSuffix}
}

// settleInstall brings one partition's directories to a settled state,
// whatever step of an install was interrupted (by a crash, or by an error
// in this process): a staging directory still being written is removed; a
// complete one is rolled forward (the old directory renamed aside, the new
// one renamed in, the renames synced); an old directory set aside is
// removed once the new one is in place, or put back if, against the
// protocol, nothing took its place; a dropped directory (DropPartition)
// is removed. Every step is idempotent, so a crash
// inside settleInstall is settled by the next one. The caller holds the
// topic's guard (or is New, before anything runs).
func (n *Node) settleInstall(key supervisor.Key) error {
	paths := n.installPathsOf(key)
	fs := n.cfg.FS
	exists := func(p string) (bool, error) { return vfs.Exists(fs, p) }
	log := n.logger.With(zap.String("topic", key.Topic), zap.Int("partition", key.Partition))
	installing, err := exists(paths.installing)
	if err != nil {
		return err
	}
	if installing {
		log.Warn("removing an incomplete partition install", zap.String("dir", paths.installing))
		if err := fs.RemoveAll(paths.installing); err != nil {
			return err
		}
		if err := fs.SyncDir(paths.topicDir); err != nil {
			return err
		}
	}
	install, err := exists(paths.install)
	if err != nil {
		return err
	}
	final, err := exists(paths.final)
	if err != nil {
		return err
	}
	if install {
		log.Info("rolling a complete partition install forward", zap.String("dir", paths.install))
		if final {
			if err := fs.RemoveAll(paths.replaced); err != nil { // a leftover of an older install
				return err
			}
			if err := fs.Rename(paths.final, paths.replaced); err != nil {
				return err
			}
		}
		if err := fs.Rename(paths.install, paths.final); err != nil {
			return err
		}
		if err := fs.SyncDir(paths.topicDir); err != nil {
			return err
		}
		final = true
	}
	replaced, err := exists(paths.replaced)
	if err != nil {
		return err
	}
	if replaced {
		if final {
			if err := fs.RemoveAll(paths.replaced); err != nil {
				return err
			}
		} else {
			log.Warn("putting back a partition directory an install set aside", zap.String("dir", paths.replaced))
			if err := fs.Rename(paths.replaced, paths.final); err != nil {
				return err
			}
		}
		if err := fs.SyncDir(paths.topicDir); err != nil {
			return err
		}
	}
	dropped, err := exists(paths.dropped)
	if err != nil {
		return err
	}
	if dropped { // a drop (DropPartition) cut short: it held nothing served
		if err := fs.RemoveAll(paths.dropped); err != nil {
			return err
		}
		if err := fs.SyncDir(paths.topicDir); err != nil {
			return err
		}
	}
	n.installs.clear(key)
	return nil
}

// recoverInstalls settles, at startup, every partition install a crash
// interrupted, before any log opens.
func (n *Node) recoverInstalls() error {
	topics, err := n.cfg.FS.ReadDir(n.topicsDir)
	if err != nil {
		return fmt.Errorf("list %s: %w", n.topicsDir, err)
	}
	for _, t := range topics {
		if !t.IsDir || wire.ValidateTopicName(t.Name) != nil {
			continue // quarantined directories are never opened: reclaim removes them whole
		}
		entries, err := n.cfg.FS.ReadDir(filepath.Join(n.topicsDir, t.Name))
		if err != nil {
			return fmt.Errorf("list topic %s: %w", t.Name, err)
		}
		settled := map[int]bool{}
		for _, e := range entries {
			p, ok := installLeftover(e.Name)
			if !ok || settled[p] {
				continue
			}
			settled[p] = true
			if err := n.settleInstall(supervisor.Key{Topic: t.Name, Partition: p}); err != nil {
				return fmt.Errorf("settle the install of %s/%d: %w", t.Name, p, err)
			}
		}
	}
	return nil
}

// installLeftover parses the name of an install's staging or set-aside
// directory.
func installLeftover(name string) (partition int, ok bool) {
	for _, suffix := range []string{wire.InstallingDirSuffix, wire.InstallDirSuffix, wire.ReplacedDirSuffix, wire.DroppedDirSuffix} {
		if dir, found := strings.CutSuffix(name, suffix); found {
			p, err := wire.ParsePartitionDirName(dir)
			return p, err == nil
		}
	}
	return 0, false
}

// unsettledInstalls are the partitions whose install failed in this
// process between the staging directory becoming complete and the swap
// being durable: their directory may be missing, so no open may serve
// them (it would create an empty log at offset 0) until settleInstall
// succeeds.
type unsettledInstalls struct {
	mu   sync.Mutex
	keys map[supervisor.Key]bool
}

func (u *unsettledInstalls) mark(key supervisor.Key) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.keys == nil {
		u.keys = map[supervisor.Key]bool{}
	}
	u.keys[key] = true
}

func (u *unsettledInstalls) clear(key supervisor.Key) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.keys, key)
}

func (u *unsettledInstalls) has(key supervisor.Key) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.keys[key]
}

// errInstallUnsettled: an open met a partition whose install could not be
// settled.
var errInstallUnsettled = errors.New("runtime: a partition install is unsettled")

// settleBeforeOpen settles an install this process left unsettled before
// the partition's log opens; the caller holds the topic's guard.
func (n *Node) settleBeforeOpen(key supervisor.Key) error {
	if !n.installs.has(key) {
		return nil
	}
	if err := n.settleInstall(key); err != nil {
		return fmt.Errorf("%w: %s/%d: %w", errInstallUnsettled, key.Topic, key.Partition, err)
	}
	return nil
}
