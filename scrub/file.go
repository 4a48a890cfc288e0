package scrub

import (
	"context"

	"github.com/narad-io/storage/vfs"
)

// pacedFile is a segment file whose every ReadAt waits for the pacer
// first: partition.WalkSegment reads through it, so the decoder is the
// read path's and the rate is the scrubber's. A wait ended by the pass's
// context fails the read, which the walk reports as an I/O error, never
// as damage.
type pacedFile struct {
	vfs.File
	ctx   context.Context
	pacer *pacer
	beat  func()
	read  int64 // bytes read through it
}

func (f *pacedFile) ReadAt(b []byte, off int64) (int, error) {
	if err := f.pacer.wait(f.ctx, len(b), f.beat); err != nil {
		return 0, err
	}
	n, err := f.File.ReadAt(b, off)
	f.read += int64(n)
	return n, err
}
