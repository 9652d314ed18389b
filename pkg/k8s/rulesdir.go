package k8s

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ownedFiles reads the rule files of dir that carry this class's marker:
// name → content. Files without it (the operator's, another class's) are
// never read again, rewritten or removed.
func ownedFiles(dir, class string) (map[string][]byte, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read rules_dir: %w", err)
	}
	out := map[string][]byte{}
	for _, e := range entries {
		n := e.Name()
		if !e.Type().IsRegular() || strings.HasPrefix(n, ".") || !strings.HasSuffix(n, ".toml") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			return nil, fmt.Errorf("read rule file: %w", err)
		}
		if cl, _, ok := parseMarker(data); ok && cl == class {
			out[n] = data
		}
	}
	return out, nil
}

// foreignFile reports whether dir holds name without this class's marker
// (a file the controller must not touch).
func foreignFile(dir, name, class string) bool {
	data, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return false
	}
	cl, _, ok := parseMarker(data)
	return !ok || cl != class
}

// writeFileAtomic writes data to dir/name through a hidden temporary file
// (the loader ignores hidden files), synced, then renamed over the name:
// a reader sees the old file or the new one, never a part.
func writeFileAtomic(dir, name string, data []byte) error {
	f, err := os.CreateTemp(dir, "."+name+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(0o644)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, name))
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", name, err)
	}
	return syncDir(dir)
}

// removeFile removes dir/name.
func removeFile(dir, name string) error {
	if err := os.Remove(filepath.Join(dir, name)); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("remove %s: %w", name, err)
	}
	return syncDir(dir)
}

// syncDir makes a rename or removal in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
