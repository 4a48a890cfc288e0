package partition

import (
	"errors"
	"fmt"

	"go.uber.org/zap"
)

// close settles the log and stops the actor: buffered records nobody
// committed are dropped, frames written above the high watermark are cut
// (so the file's boundary equals the record tail, which is what lets the
// next open trust it), a full segment is rolled, the exact high watermark
// is written to the hwm file unless it already holds it, and every file is
// closed. Readers then see a closed view.
func (s *state) close() error {
	var errs []error
	s.buffer, s.bufferBytes, s.bufferFrame, s.bufferPools, s.bufferPinned, s.unwritten, s.appended = nil, 0, nil, nil, 0, nil, 0
	s.nextOffset, s.written = s.hwm, s.hwm
	if s.writePos > s.hwmPos || s.tailDirty {
		s.discard(errors.New("log closed"))
	}
	if s.active.full && s.poison == nil {
		if err := s.roll(); err != nil {
			s.log.logger.Warn("segment roll at close failed", zap.Error(err))
		}
	}
	if s.poison == nil {
		if err := s.trimPrealloc(); err != nil {
			s.log.logger.Warn("trim of the space written ahead failed; the next open trims it", zap.Error(err))
		}
	}
	if s.hwmReleased || !s.hwmFileExists || s.hwmFileValue != s.hwm {
		if err := writeHWMFile(s.log.opts.FS, s.log.dir, s.hwm, s.hwmFileExists); err != nil {
			s.log.metrics.countError(kindHWMFile)
			errs = append(errs, err)
		}
	}
	if s.timer != nil {
		s.timer.Stop()
		s.timerOn = false
	}
	s.closed = true
	s.publish()
	s.active.file.release() // the actor's reference
	for _, seg := range s.sealed {
		seg.file.retire()
	}
	s.active.file.retire()
	s.log.hot.clear()
	s.log.cache.close()
	s.log.notify.closeAll()
	s.log.metrics.openLogs.Dec()
	if s.poison != nil {
		errs = append(errs, fmt.Errorf("closing a poisoned log: %w", s.poison))
	}
	return errors.Join(errs...)
}
