// Package diskfault makes a directory's filesystem fail as a disk does, for
// tests of the journal and of the sidecar: a small tmpfs to fill up (Tmpfs,
// Fill), a read-only mount over a directory (ReadOnly), an immutable
// directory (Immutable). The faults are real: the kernel refuses the
// writes.
//
// They need root's capabilities (CAP_SYS_ADMIN to mount,
// CAP_LINUX_IMMUTABLE); where a fault cannot be made, the test is skipped,
// or fails when $CI is set, so that CI never silently skips it. Every fault
// is undone when the test ends; a test binary killed before its cleanups
// leaves its tmpfs mounted under the temporary directory.
package diskfault

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// unavailable skips the test because the fault cannot be made, or fails it
// under CI.
func unavailable(t testing.TB, what string, err error) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("%s: %v (the disk fault tests need root's capabilities)", what, err)
	}
	t.Skipf("%s: %v (the disk fault tests need root's capabilities)", what, err)
}

// Tmpfs mounts a tmpfs of size bytes on a new temporary directory and
// returns the directory; it is unmounted when the test ends.
func Tmpfs(t testing.TB, size int64) string {
	t.Helper()
	dir := t.TempDir()
	opts := "size=" + strconv.FormatInt(size, 10) + ",mode=0700"
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		unavailable(t, "mount a tmpfs", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount the tmpfs on %s: %v", dir, err)
		}
	})
	return dir
}

// Free returns the bytes an unprivileged process may still write on dir's
// filesystem.
func Free(t testing.TB, dir string) int64 {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatalf("statfs %s: %v", dir, err)
	}
	return int64(st.Bavail) * st.Bsize
}

// Fill allocates a file in dir until its filesystem has at most free bytes
// left (less by up to a block), and returns a function removing it, which
// also runs when the test ends.
func Fill(t testing.TB, dir string, free int64) (remove func()) {
	t.Helper()
	name := filepath.Join(dir, "diskfault-filler")
	f, err := os.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatalf("filler: %v", err)
	}
	defer f.Close()
	if n := Free(t, dir) - free; n > 0 {
		if err := unix.Fallocate(int(f.Fd()), 0, 0, n); err != nil {
			t.Fatalf("filler of %d bytes: %v", n, err)
		}
	}
	removed := false
	remove = func() {
		if removed {
			return
		}
		removed = true
		if err := os.Remove(name); err != nil {
			t.Errorf("remove the filler: %v", err)
		}
	}
	t.Cleanup(remove)
	return remove
}

// ReadOnly mounts dir read-only over itself, as a filesystem remounted
// read-only appears to new writes (files already open keep writing to the
// mount below, which a real read-only remount would refuse: the kernel
// does not remount a filesystem read-only while files are open for
// writing). It returns a function making dir writable again, which also
// runs when the test ends.
func ReadOnly(t testing.TB, dir string) (restore func()) {
	t.Helper()
	if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
		unavailable(t, "bind-mount "+dir, err)
	}
	if err := unix.Mount("", dir, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY, ""); err != nil {
		_ = unix.Unmount(dir, unix.MNT_DETACH)
		t.Fatalf("remount %s read-only: %v", dir, err)
	}
	restored := false
	restore = func() {
		if restored {
			return
		}
		restored = true
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount the read-only %s: %v", dir, err)
		}
	}
	t.Cleanup(restore)
	return restore
}

// Immutable sets the immutable attribute of dir: no file can be created in
// it, renamed or removed, even by root; files already open keep writing.
// It returns a function clearing the attribute, which also runs when the
// test ends.
func Immutable(t testing.TB, dir string) (restore func()) {
	t.Helper()
	if err := setImmutable(dir, true); err != nil {
		unavailable(t, "make "+dir+" immutable", err)
	}
	restored := false
	restore = func() {
		if restored {
			return
		}
		restored = true
		if err := setImmutable(dir, false); err != nil {
			t.Errorf("clear the immutable attribute of %s: %v", dir, err)
		}
	}
	t.Cleanup(restore)
	return restore
}

// fsImmutableFL is FS_IMMUTABLE_FL of linux/fs.h, which x/sys/unix lacks.
const fsImmutableFL = 0x10

func setImmutable(dir string, on bool) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	flags, err := unix.IoctlGetUint32(int(f.Fd()), unix.FS_IOC_GETFLAGS)
	if err != nil {
		return err
	}
	if on {
		flags |= fsImmutableFL
	} else {
		flags &^= fsImmutableFL
	}
	return unix.IoctlSetPointerInt(int(f.Fd()), unix.FS_IOC_SETFLAGS, int(flags))
}
