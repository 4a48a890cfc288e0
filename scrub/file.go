package scrub

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"

	"github.com/narad-io/storage/vfs"
)

// pacedFile is a segment file whose reads wait for the pacer first:
// partition.WalkSegment reads through it, so the decoder is the read
// path's and the rate is the scrubber's. A read is made in parts of at
// most pacerStep bytes, each paid for just before it is read, so the disk
// sees small reads spread evenly over time rather than a window's
// megabyte at once. A wait ended by the pass's context fails the read,
// which the walk reports as an I/O error, never as damage. After each
// part the file's name is looked up (fs): once retention has unlinked it,
// the read fails with fs.ErrNotExist and the pass leaves the segment, as
// it does one removed before it was opened, rather than reading a file
// nobody holds to its end at the paced rate, keeping its blocks from the
// free space retention made.
type pacedFile struct {
	vfs.File
	fs    vfs.FS
	ctx   context.Context
	pacer *pacer
	beat  func()
	read  int64 // bytes read through it
}

func (f *pacedFile) ReadAt(b []byte, off int64) (int, error) {
	done := 0
	for done < len(b) {
		part := b[done:min(len(b), done+pacerStep)]
		if err := f.pacer.wait(f.ctx, len(part), f.beat); err != nil {
			return done, err
		}
		n, err := f.File.ReadAt(part, off+int64(done))
		done += n
		f.read += int64(n)
		if err == io.EOF {
			return done, err
		}
		if err != nil {
			return done, &readFailure{pos: off + int64(done), err: err}
		}
		if n < len(part) { // io.ReaderAt: a short read comes with an error
			break
		}
		if _, err := f.fs.Stat(f.Name()); errors.Is(err, fs.ErrNotExist) {
			return done, fmt.Errorf("%s unlinked under the scrub: %w", f.Name(), err)
		}
	}
	return done, nil
}

// readFailure is a read of a segment that failed for the file system (an
// EIO, say), not for what the file holds: pos is the byte it failed at.
type readFailure struct {
	pos int64
	err error
}

func (e *readFailure) Error() string { return fmt.Sprintf("read at byte %d: %v", e.pos, e.err) }
func (e *readFailure) Unwrap() error { return e.err }
