package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// binaryCacheDir holds the bridge and worker binaries the e2e packages linked, under the checkout's bin:
// every package of a run builds the same two binaries from the same tree, and go build links them again
// each time (about 13 s of CPU here, serial with the tests under go test -p 1), since Go caches
// compiled packages but not linked programs.
const binaryCacheDir = "e2e-bin"

// binaryKey names what a binary is built from: the build ID of every package it links (each one covers
// that package's sources and, through its imports, their build IDs; the toolchain too), the build tags,
// and the VCS state go build stamps into it (the worker names its build ID after it).
func binaryKey(ctx context.Context, repo, pkg string, tags []string) (string, error) {
	h := sha256.New()
	args := []string{"list", "-deps", "-export", "-f", "{{.ImportPath}} {{.BuildID}}"}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	for _, argv := range [][]string{
		append([]string{"go"}, append(args, pkg)...),
		{"git", "rev-parse", "HEAD"},
		// go build marks the binary modified when this prints anything (untracked files too).
		{"git", "status", "--porcelain"},
	} {
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Dir = repo
		out, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("%s: %w", strings.Join(argv, " "), err)
		}
		fmt.Fprintf(h, "%s\n%s\n", strings.Join(argv, " "), out)
	}
	return hex.EncodeToString(h.Sum(nil))[:20], nil
}

// cachedBinary is the cached build of key under the name name.
func cachedBinary(repo, name, key string) string {
	return filepath.Join(repo, "bin", binaryCacheDir, name+"-"+key)
}

// storeBinary keeps the freshly built binary src as the cached build of key, dropping the older builds
// of the same name (a run that still uses one holds its own link).
func storeBinary(repo, name, key, src string) error {
	dst := cachedBinary(repo, name, key)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	old, _ := filepath.Glob(filepath.Join(filepath.Dir(dst), name+"-*"))
	tmp := dst + ".tmp"
	_ = os.Remove(tmp)
	if err := linkOrCopy(src, tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, dst); err != nil {
		return err
	}
	for _, o := range old {
		if o != dst {
			_ = os.Remove(o)
		}
	}
	return nil
}

// linkOrCopy makes dst the file src: a hard link, or a copy where the two are on different file systems.
func linkOrCopy(src, dst string) error {
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
