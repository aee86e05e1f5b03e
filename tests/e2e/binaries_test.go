package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBinaryKeyNamesTheBuild: the same package and tags give the same key; other tags (the upgrade
// test's build B) or another package give another, so a cached build is never taken for a different one.
func TestBinaryKeyNamesTheBuild(t *testing.T) {
	repo, err := filepath.Abs("../..")
	require.NoError(t, err)
	ctx := context.Background()
	key := func(pkg string, tags ...string) string {
		k, err := binaryKey(ctx, repo, pkg, tags)
		require.NoError(t, err)
		return k
	}
	worker := key(packages[Worker])
	require.Equal(t, worker, key(packages[Worker]), "the same build twice")
	require.NotEqual(t, worker, key(packages[Worker], "upgradeprobe"), "build tags")
	require.NotEqual(t, worker, key(packages[Bridge]), "another program")
}

// TestStoreBinaryKeepsTheLastBuild: a stored build is found under its key, replaces the older build of
// the same name (a run still using it keeps its own link) and leaves other names (a tagged build) alone.
func TestStoreBinaryKeepsTheLastBuild(t *testing.T) {
	repo := t.TempDir()
	build := func(name, content string) string {
		p := filepath.Join(t.TempDir(), name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o755))
		return p
	}
	require.NoError(t, storeBinary(repo, "w", "k1", build("w", "one")))
	require.NoError(t, storeBinary(repo, "w+tag", "k1", build("w", "tagged")))
	inUse := filepath.Join(t.TempDir(), "w")
	require.NoError(t, linkOrCopy(cachedBinary(repo, "w", "k1"), inUse))

	require.NoError(t, storeBinary(repo, "w", "k2", build("w", "two")))
	got, err := os.ReadFile(cachedBinary(repo, "w", "k2"))
	require.NoError(t, err)
	require.Equal(t, "two", string(got))
	require.NoFileExists(t, cachedBinary(repo, "w", "k1"), "the older build of the same name")
	require.FileExists(t, cachedBinary(repo, "w+tag", "k1"), "a build of another name")
	got, err = os.ReadFile(inUse)
	require.NoError(t, err)
	require.Equal(t, "one", string(got), "the link a run holds")
	left, _ := filepath.Glob(filepath.Join(repo, "bin", binaryCacheDir, "*.tmp"))
	require.Empty(t, left)
}
