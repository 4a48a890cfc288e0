package main

// The diskcheck command: flag parsing and exit statuses around
// server.CheckDisk, which probes, and package diskcheck, which prints.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os/signal"
	"syscall"

	"github.com/narad-io/storage/datadir"
	"github.com/narad-io/storage/diskcheck"
	"github.com/narad-io/storage/server"
)

// runDiskCheck implements `narad-storaged diskcheck [--data-dir DIR]
// [--json] ...`; it returns the process exit code: 0 when no check found
// an error (nor, with --strict, a warning), 1 when one did, 2 on a usage
// error or a directory that cannot be probed.
func runDiskCheck(args []string, stdout, stderr io.Writer) int {
	cfg := defaultConfig()
	flags := flag.NewFlagSet("diskcheck", flag.ContinueOnError)
	flags.SetOutput(stderr)
	configFile := flags.String("config", "", "serve's JSON config file, for its data_dir, floors, max_open_logs and max_connections (flags win)")
	flags.StringVar(&cfg.DataDir, "data-dir", cfg.DataDir, "the data directory to probe (it must exist)")
	asJSON := flags.Bool("json", false, "print one JSON document instead of text")
	strict := flags.Bool("strict", false, "exit 1 on a warning too")
	budget := flags.Duration("budget", diskcheck.DefaultBudget, "time after which the probe begins no new round")
	flags.Uint64Var(&cfg.MinFreeBytes, "min-free-bytes", cfg.MinFreeBytes, "serve's floor of free bytes, to hold the free space against")
	flags.Uint64Var(&cfg.MinFreeInodes, "min-free-inodes", cfg.MinFreeInodes, "serve's floor of free inodes")
	flags.IntVar(&cfg.MaxOpenLogs, "max-open-logs", cfg.MaxOpenLogs, "serve's open-log budget, to hold the open-file limit against (0: from the limit, as serve computes it; -1: none)")
	flags.IntVar(&cfg.MaxConnections, "max-connections", cfg.MaxConnections, "serve's connection cap, which the budget leaves descriptors to (0: from the limit)")
	flags.Usage = func() {
		fmt.Fprint(stderr, "usage: narad-storaged diskcheck [--data-dir DIR] [--json] [--strict] [--budget D] [--config FILE] [serve's floors and budget]\n\n"+
			"Probes the file system of DIR within the budget: fdatasync latency after a 4 KiB\n"+
			"append and after an overwrite, directory fsync, fallocate, the file system's type\n"+
			"and its device's write cache, free space and inodes against the floors, and the\n"+
			"open-file limit against the open-log budget. It writes only its own probe files\n"+
			"in DIR and removes them; it runs beside a daemon serving DIR too. The open-file\n"+
			"limit is this command's own: run it under the daemon's limit.\n"+
			"Errors: a failed write, flush or fsync, free space or inodes under the floor,\n"+
			"a tmpfs or ramfs (the data would not survive a reboot; the daemon's start only\n"+
			"warns of one).\n"+
			"Warnings: implausibly fast flushes, an overlay or network file system,\n"+
			"no fallocate, an open-file limit under what the budget needs.\n"+
			"Exit status: 0 no error (with --strict, no warning either), 1 otherwise,\n"+
			"2 usage error or a directory that cannot be probed.\n\n")
		flags.PrintDefaults()
	}
	if err := flags.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if flags.NArg() > 0 {
		fmt.Fprintf(stderr, "diskcheck: unexpected argument %q (the data directory goes in --data-dir)\n", flags.Arg(0))
		flags.Usage()
		return 2
	}
	if *configFile != "" {
		if err := mergeDiskCheckConfig(flags, &cfg, *configFile); err != nil {
			fmt.Fprintf(stderr, "diskcheck: %v\n", err)
			return 2
		}
	}
	if cfg.DataDir == "" {
		fmt.Fprintln(stderr, "diskcheck: --data-dir is empty")
		return 2
	}
	if *budget <= 0 {
		fmt.Fprintf(stderr, "diskcheck: --budget %v: give a positive duration\n", *budget)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	r, err := server.CheckDisk(ctx, cfg.Config, *budget)
	if err != nil {
		fmt.Fprintf(stderr, "diskcheck: %v\n", err)
		return 2
	}
	write := diskcheck.WriteText
	if *asJSON {
		write = diskcheck.WriteJSON
	}
	if err := write(stdout, r); err != nil {
		fmt.Fprintf(stderr, "diskcheck: %v\n", err)
		return 2
	}
	if holder, inUse, err := datadir.InUse(nil, cfg.DataDir); err == nil && inUse {
		fmt.Fprintf(stderr, "diskcheck: %s is served by %s: the descriptors check held this command's own open-file limit against the budget, not the daemon's; run it under the daemon's limit (its unit's LimitNOFILE=) to check that one\n", cfg.DataDir, holder)
	}
	if r.Count(diskcheck.Error) > 0 || *strict && r.Count(diskcheck.Warning) > 0 {
		return 1
	}
	return 0
}

// mergeDiskCheckConfig takes from serve's config file the keys the
// probe holds its findings against, where no flag gave them.
func mergeDiskCheckConfig(flags *flag.FlagSet, cfg *config, name string) error {
	fromFile, err := readConfigFile(name)
	if err != nil {
		return err
	}
	set := map[string]bool{}
	flags.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for flagName, apply := range map[string]func(){
		"data-dir":        func() { cfg.DataDir = fromFile.DataDir },
		"min-free-bytes":  func() { cfg.MinFreeBytes = fromFile.MinFreeBytes },
		"min-free-inodes": func() { cfg.MinFreeInodes = fromFile.MinFreeInodes },
		"max-open-logs":   func() { cfg.MaxOpenLogs = fromFile.MaxOpenLogs },
		"max-connections": func() { cfg.MaxConnections = fromFile.MaxConnections },
	} {
		if !set[flagName] {
			apply()
		}
	}
	return nil
}
