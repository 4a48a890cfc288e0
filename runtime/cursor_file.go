package runtime

import (
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"

	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/wire"
)

// A cursor's file is written out in place, one slot at a time (wire's
// cursor file: two checksummed slots 4 KiB apart, the newer sequence
// wins): a write-out writes the slot the file's newest position is not
// in, then fdatasyncs. A short or torn write, a crash before the sync,
// damages only that slot, and the other still holds the position before
// the write-out, so a crash leaves the old position or the new one,
// never a blend of the two. It costs one pwrite and one fdatasync, as the
// 8-byte format did, and no directory sync: a write-out comes once per
// commit interval for every cursor that moved, and a temporary file
// renamed into place would add a create, a rename and a directory fsync
// to each. The rename is kept for the rare whole-file replace: a file in
// the older 8-byte format (its one value has no second slot to fall back
// on, so writing a slot over it in place could tear it) and a damaged
// one.

// writeOut writes c's position to its file and fdatasyncs it, if it moved
// since the last write-out; the caller holds c.mu. A failed write-out
// leaves the slot it wrote to be written again: the other slot, holding
// the newest position that reached the file, is never the target.
func (c *cursor) writeOut(files vfs.FS) error {
	if c.dropped || c.pos == c.written {
		return nil
	}
	if c.replace || c.seq == math.MaxUint64 { // no next sequence: the other slot would lose
		return c.replaceFile(files)
	}
	next := 1 - c.slot
	slot, err := wire.EncodeCursorSlot(wire.CursorSlot{Sequence: c.seq + 1, Position: c.pos})
	if err != nil {
		return err
	}
	f, err := files.OpenFile(c.path, os.O_WRONLY)
	if err != nil {
		return err
	}
	defer f.Close()
	// From here a failure may leave the write in the file (in the page
	// cache, marked clean by a failed fdatasync): what the file holds is
	// unknown until a write-out succeeds, wherever pos goes meanwhile, so
	// a move back to the last position written out is written out too.
	if _, err := f.WriteAt(slot[:], wire.CursorSlotOffset(next)); err != nil {
		c.written = -1
		return err
	}
	if err := f.Sync(); err != nil {
		c.written = -1
		return err
	}
	c.seq, c.slot, c.written = c.seq+1, next, c.pos
	return nil
}

// replaceFile replaces c's whole file with a new one holding c.pos in
// slot 0: a temporary file (one a crash left removed first) written,
// fdatasynced and renamed over the file, then the directory synced. A
// crash leaves the old file or the new one. The caller holds c.mu.
func (c *cursor) replaceFile(files vfs.FS) error {
	content, err := wire.EncodeCursorSlot(wire.CursorSlot{Sequence: c.seq + 1, Position: c.pos})
	if err != nil {
		return err
	}
	dir := filepath.Dir(c.path)
	tmpName, err := wire.CursorTempFileName(c.name)
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, tmpName)
	if err := files.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := writeSynced(files, tmp, content[:]); err != nil {
		return err
	}
	if err := files.Rename(tmp, c.path); err != nil {
		return err
	}
	if err := files.SyncDir(dir); err != nil {
		c.written = -1 // the rename may stand: the file holds c.pos, not durably
		return err
	}
	c.seq, c.slot, c.replace, c.written = c.seq+1, 0, false, c.pos
	return nil
}

// createCursorFile writes a new cursor's file holding c.pos durably: a
// temporary file (one a crash left removed first) written and
// fdatasynced, renamed to the cursor's name, then the directory synced. A
// crash leaves no cursor (made again by the next create, from where it
// says) or the whole file: never a torn one, which would read as the
// partition's first record, a position a cursor made from latest never
// stood at.
func (n *Node) createCursorFile(dir string, c *cursor) error {
	content, err := wire.EncodeCursorFile(c.pos)
	if err != nil {
		return err
	}
	tmpName, err := wire.CursorTempFileName(c.name)
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, tmpName)
	if err := n.cfg.FS.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := writeSynced(n.cfg.FS, tmp, content); err != nil {
		return err
	}
	if err := n.cfg.FS.Rename(tmp, c.path); err != nil {
		return err
	}
	if err := n.cfg.FS.SyncDir(dir); err != nil {
		return err
	}
	c.seq, c.slot, c.replace, c.written = 1, 0, false, c.pos
	return nil
}

// writeSynced writes content at the start of path (created if missing)
// and fdatasyncs it.
func writeSynced(files vfs.FS, path string, content []byte) error {
	f, err := files.OpenFile(path, os.O_WRONLY|os.O_CREATE)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(content, 0); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
