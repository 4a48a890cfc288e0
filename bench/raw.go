package bench

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// RawName is the engine every other is quoted against.
const RawName = "raw"

// rawEngine is the floor: each batch's records, each behind a 4-byte
// length, appended with one pwrite and made durable with one fdatasync.
// With prealloc the file is fallocate()d 64 MiB ahead, so a commit never
// changes its size and fdatasync has no size to journal (what etcd's
// preallocated segments and pebble's recycled WAL files get); its read
// back is the plain read every engine's is quoted against.
type rawEngine struct {
	mu       sync.Mutex
	f        *os.File
	end      int64 // bytes written
	alloc    int64 // bytes fallocate()d
	prealloc bool
	buf      []byte
}

const rawPreallocStep = 64 << 20

func openRaw(prealloc bool) func(string, Cell) (Engine, error) {
	return func(dir string, _ Cell) (Engine, error) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		f, err := os.OpenFile(dir+"/raw.log", os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return nil, err
		}
		return &rawEngine{f: f, prealloc: prealloc}, nil
	}
}

func (r *rawEngine) Commit(batch [][]byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.buf = r.buf[:0]
	for _, rec := range batch {
		r.buf = binary.BigEndian.AppendUint32(r.buf, uint32(len(rec)))
		r.buf = append(r.buf, rec...)
	}
	if r.prealloc && r.end+int64(len(r.buf)) > r.alloc {
		step := max(rawPreallocStep, int64(len(r.buf)))
		if err := unix.Fallocate(int(r.f.Fd()), 0, r.alloc, step); err != nil {
			return fmt.Errorf("fallocate: %w", err)
		}
		r.alloc += step
		if err := unix.Fsync(int(r.f.Fd())); err != nil { // the new size, once
			return err
		}
	}
	if _, err := r.f.WriteAt(r.buf, r.end); err != nil {
		return err
	}
	if err := unix.Fdatasync(int(r.f.Fd())); err != nil {
		return err
	}
	r.end += int64(len(r.buf))
	return nil
}

// ReadAll reads the file from the start in 1 MiB reads and splits it; a
// record cut by a read's end moves to the buffer's front, and the next read
// fills in behind it.
func (r *rawEngine) ReadAll(fn func([]byte)) error {
	buf := make([]byte, 1<<20)
	have := 0 // bytes of a cut record at buf's front
	for pos := int64(0); pos < r.end; {
		want := min(int64(len(buf)-have), r.end-pos)
		if want == 0 { // a record larger than the buffer
			buf = append(buf, make([]byte, len(buf))...)
			continue
		}
		n, err := r.f.ReadAt(buf[have:have+int(want)], pos)
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		if n == 0 {
			return fmt.Errorf("raw: the file ends at byte %d, before %d", pos, r.end)
		}
		pos += int64(n)
		data := buf[:have+n]
		for len(data) >= 4 {
			l := int(binary.BigEndian.Uint32(data))
			if len(data) < 4+l {
				break
			}
			fn(data[4 : 4+l])
			data = data[4+l:]
		}
		have = copy(buf, data)
	}
	if have > 0 {
		return fmt.Errorf("raw: %d bytes of a torn record at the end", have)
	}
	return nil
}

func (r *rawEngine) Close() error { return r.f.Close() }

// bareProtocol is narad's durable commit with nothing else: the batch in
// one CRC-32C-checked frame (a 4-byte length and the checksum before the
// records), one pwrite, fdatasync, then the frame read back and its
// checksum checked, on one file. What the log adds over it (envelopes, an
// actor, group commit, the frame cache, preparing space, segments) is the
// gap between the two in the same cell.
type bareProtocol struct {
	*rawEngine
	back []byte
}

func openBareProtocol(dir string, c Cell) (Engine, error) {
	e, err := openRaw(false)(dir, c)
	if err != nil {
		return nil, err
	}
	return &bareProtocol{rawEngine: e.(*rawEngine)}, nil
}

func (b *bareProtocol) Commit(batch [][]byte) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf[:0], make([]byte, 8)...)
	for _, rec := range batch {
		b.buf = binary.BigEndian.AppendUint32(b.buf, uint32(len(rec)))
		b.buf = append(b.buf, rec...)
	}
	binary.BigEndian.PutUint32(b.buf, uint32(len(b.buf)-8))
	binary.BigEndian.PutUint32(b.buf[4:], crc32.Checksum(b.buf[8:], castagnoli))
	if _, err := b.f.WriteAt(b.buf, b.end); err != nil {
		return err
	}
	if err := unix.Fdatasync(int(b.f.Fd())); err != nil {
		return err
	}
	if cap(b.back) < len(b.buf) {
		b.back = make([]byte, len(b.buf))
	}
	back := b.back[:len(b.buf)]
	if _, err := b.f.ReadAt(back, b.end); err != nil {
		return err
	}
	if crc32.Checksum(back[8:], castagnoli) != binary.BigEndian.Uint32(back[4:]) {
		return fmt.Errorf("bare protocol: frame at byte %d fails its checksum", b.end)
	}
	b.end += int64(len(b.buf))
	return nil
}

// ReadAll reads the frames back, checking each one's checksum.
func (b *bareProtocol) ReadAll(fn func([]byte)) error {
	data := make([]byte, b.end)
	if _, err := b.f.ReadAt(data, 0); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	for len(data) > 0 {
		if len(data) < 8 {
			return errors.New("bare protocol: torn frame header")
		}
		n := int(binary.BigEndian.Uint32(data))
		if len(data) < 8+n || crc32.Checksum(data[8:8+n], castagnoli) != binary.BigEndian.Uint32(data[4:]) {
			return errors.New("bare protocol: damaged frame")
		}
		for recs := data[8 : 8+n]; len(recs) > 0; {
			l := int(binary.BigEndian.Uint32(recs))
			fn(recs[4 : 4+l])
			recs = recs[4+l:]
		}
		data = data[8+n:]
	}
	return nil
}
