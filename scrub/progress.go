package scrub

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/wire"
	"go.uber.org/zap"
)

// loadProgress reads a partition's scrub.progress. A missing file is a
// partition never scrubbed; a damaged or unreadable one is logged and
// read as one: the pass starts the partition over, which costs a read
// and loses nothing.
func (s *Scrubber) loadProgress(dir string) wire.ScrubProgress {
	name := filepath.Join(dir, wire.ScrubProgressFileName)
	b, err := vfs.ReadFile(s.cfg.FS, name, wire.ScrubProgressFileSize)
	if errors.Is(err, fs.ErrNotExist) {
		return wire.ScrubProgress{}
	}
	if err == nil {
		var p wire.ScrubProgress
		if p, err = wire.DecodeScrubProgress(b); err == nil {
			return p
		}
	}
	s.logger.Warn("scrub: progress unreadable; the partition's pass starts over", zap.String("file", name), zap.Error(err))
	return wire.ScrubProgress{}
}

// saveProgress replaces a partition's scrub.progress with p, under the
// topic's guard and only while the directory exists (Node.InPartition)
// and the topic's incarnation marker still reads as marker, what it read
// when the pass began the partition (a topic deleted and made again under
// the pass gets no progress of its predecessor's), and, when checked is
// the segment just walked (whose end p.Next is), while its name holds a
// file of the size walked (checked.size). A topic with no incarnation id
// has no marker, and this is then what tells a new incarnation from the
// one checked (a recreate whose segment of that name has the same size
// would not be told; nor is one between the last segment's write and
// the completion's, which reads nothing in between). A segment retention
// removed between the walk and the write refuses it too: the partition
// is left for this pass, and the next resumes where the last write
// stands. The write is a temporary file written and synced, renamed over
// the old one, the directory synced (vfs.WriteFileAtomic), so a crash at
// any step leaves the old progress or the new, never a torn file.
func (s *Scrubber) saveProgress(key partitionKey, dir string, marker string, p wire.ScrubProgress, checked *sealedSegment) error {
	b, err := wire.EncodeScrubProgress(p)
	if err != nil {
		return err
	}
	return s.cfg.Node.InPartition(key.topic, key.partition, func() error {
		if now := s.incarnation(dir); now != marker {
			return fmt.Errorf("%w: %s: incarnation %q, the pass began under %q", ErrPartitionGone, dir, now, marker)
		}
		if checked != nil && checked.size >= 0 {
			if err := s.stillOurs(dir, marker, *checked); err != nil {
				return fmt.Errorf("%w: %w", ErrPartitionGone, err)
			}
		}
		return vfs.WriteFileAtomic(s.cfg.FS, filepath.Join(dir, wire.ScrubProgressFileName), b[:])
	})
}

// incarnation is the content of the incarnation marker of the topic
// whose partition directory is dir; "" when there is none or it cannot
// be read (a marker is a few bytes).
func (s *Scrubber) incarnation(dir string) string {
	b, err := vfs.ReadFile(s.cfg.FS, filepath.Join(filepath.Dir(dir), wire.IncarnationFileName), 1<<10)
	if err != nil {
		return ""
	}
	return string(b)
}
