package tool

// How the tools coexist with a running node: they take no lock and write
// nothing, so they run beside it, but they say when one holds the data
// directory, because what they read there may be changing under them.

import (
	"fmt"
	"io"

	"github.com/narad-io/storage/datadir"
	"github.com/narad-io/storage/vfs"
)

// filesAndMessages fills in the options' defaults: the real file system,
// and messages discarded.
func filesAndMessages(files vfs.FS, messages io.Writer) (vfs.FS, io.Writer) {
	if files == nil {
		files = vfs.OS{}
	}
	if messages == nil {
		messages = io.Discard
	}
	return files, messages
}

// warnInUse tells, on messages, that a running process holds the data
// directory's lock (the read-only tools still run), and returns its
// name, or "" when none does. command names the tool in the line.
func warnInUse(files vfs.FS, messages io.Writer, command, dataDir string) string {
	holder, inUse, err := datadir.InUse(files, dataDir)
	switch {
	case err != nil:
		fmt.Fprintf(messages, "%s: warning: cannot tell whether %s is in use: %v\n", command, dataDir, err)
	case inUse:
		fmt.Fprintf(messages, "%s: warning: %s is in use by %s; reading anyway, but a torn tail may be a write in flight\n", command, dataDir, holder)
		return holder
	}
	return ""
}
