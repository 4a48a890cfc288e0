package partition

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/narad-io/storage/vfs"
	"github.com/narad-io/storage/wire"
	"go.uber.org/zap"
)

// hwmFileState is what the hwm file held at open.
type hwmFileState struct {
	exists  bool  // the file exists (so creating it needs no directory sync)
	present bool  // it holds a value (8 valid bytes)
	value   int64 // the value, when present
}

// readHWMFile reads the hwm file. A missing or empty file holds no value; a
// file of any other length, or a negative value, is damage: logged, counted
// and treated as holding no value, so the boundary comes from the tail
// (docs/durability.md row 12). Only an I/O error fails the open.
func readHWMFile(files vfs.FS, path string, logger *zap.Logger) (hwmFileState, error) {
	b, err := vfs.ReadFile(files, path, 64)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return hwmFileState{}, nil
	case errors.Is(err, vfs.ErrFileTooLarge):
		logger.Warn("hwm file is damaged; taking the boundary from the tail", zap.String("path", path), zap.Error(err))
		return hwmFileState{exists: true}, nil
	case err != nil:
		return hwmFileState{}, fmt.Errorf("read hwm file %s: %w", path, err)
	}
	v, present, err := wire.DecodeOffsetFile(b)
	if err != nil {
		logger.Warn("hwm file is damaged; taking the boundary from the tail", zap.String("path", path), zap.Error(err))
		return hwmFileState{exists: true}, nil
	}
	return hwmFileState{exists: true, present: present, value: v}, nil
}

// emptyHWMFile truncates the hwm file to empty and fsyncs it: done once,
// before the first high-watermark advance of the log's life, so that a
// crash while the log is open leaves no stale boundary behind
// (docs/design.md, "High watermark and hidden tail").
func emptyHWMFile(files vfs.FS, dir string) error {
	path := filepath.Join(dir, wire.HWMFileName)
	f, err := files.OpenFile(path, os.O_WRONLY)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("empty hwm file %s: open: %w", path, err)
	}
	defer f.Close()
	if err := f.Truncate(0); err != nil {
		return fmt.Errorf("empty hwm file %s: truncate: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("empty hwm file %s: fsync: %w", path, err)
	}
	return nil
}

// writeHWMFile writes the exact high watermark at close: 8 bytes written in
// place at offset 0 and fdatasynced; the directory is synced when the call
// created the file (docs/design.md R7). A crash part-way leaves the old
// content, an empty file or 8 bytes of any value; open trusts the file only
// when it equals the CRC-verified tail, so none of these can hide a record
// (docs/design.md R1).
func writeHWMFile(files vfs.FS, dir string, hwm int64, existed bool) error {
	path := filepath.Join(dir, wire.HWMFileName)
	content, err := wire.EncodeOffsetFile(hwm)
	if err != nil {
		return err
	}
	f, err := files.OpenFile(path, os.O_WRONLY|os.O_CREATE)
	if err != nil {
		return fmt.Errorf("write hwm file %s: open: %w", path, err)
	}
	if _, err := f.WriteAt(content[:], 0); err != nil {
		f.Close()
		return fmt.Errorf("write hwm file %s: write: %w", path, err)
	}
	if err := f.Truncate(wire.OffsetFileSize); err != nil {
		f.Close()
		return fmt.Errorf("write hwm file %s: truncate: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("write hwm file %s: fsync: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write hwm file %s: close: %w", path, err)
	}
	if !existed {
		if err := files.SyncDir(dir); err != nil {
			return fmt.Errorf("write hwm file %s: sync directory: %w", path, err)
		}
	}
	return nil
}
