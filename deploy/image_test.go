package deploy_test

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/validate"

	"github.com/tah-dev/tah/deploy/image"
)

// buildImage runs tah-image as make image does and returns the tarball.
func buildImage(t *testing.T, ctx context.Context, out string) string {
	t.Helper()
	bins := []string{"tah-node", "tahctl", "tah-trust"}
	args := []string{"--out", out, "--repo", "tah-node"}
	for _, b := range bins {
		args = append(args, "--bin", b+"="+binary(t, b))
	}
	run(t, ctx, ".", nil, binary(t, "tah-image"), args...)
	return out
}

// TestImage checks the tarball make image writes as docker load reads it
// (manifest.json, the configuration, the layers by their digests), what the
// configuration says (the non-root user, tah-node as the entrypoint, the
// labels of the build), that the binaries in the layer run, and that the
// same binaries give the same bytes.
func TestImage(t *testing.T) {
	t.Parallel()
	builtTools(t) // before the hang bound below: a build on a busy machine may take minutes
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	path := buildImage(t, ctx, filepath.Join(dir, "tah-image.tar"))

	// docker load's view: manifest.json names the tags, the config and the
	// layers, each file present under its name.
	manifest := readManifest(t, path)
	if len(manifest) != 1 {
		t.Fatalf("manifest.json has %d images, want 1", len(manifest))
	}
	tags := strings.Join(manifest[0].RepoTags, " ")
	if !strings.Contains(tags, "tah-node:latest") || len(manifest[0].RepoTags) != 2 {
		t.Errorf("tags %q: want tah-node:latest and tah-node:<version>", tags)
	}
	img, err := tarball.ImageFromPath(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Every digest, size and diff id as the config and manifest state them.
	if err := validate.Image(img); err != nil {
		t.Fatalf("the image does not hold together: %v", err)
	}

	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	checkConfig(t, cf, binary(t, "tah-node"))

	// The layer's files: the binaries executable, the user known.
	root := extract(t, img, filepath.Join(dir, "rootfs"))
	for _, b := range []string{"tah-node", "tahctl", "tah-trust"} {
		fi, err := os.Stat(filepath.Join(root, "usr/local/bin", b))
		if err != nil {
			t.Fatalf("%s is not in the image: %v", b, err)
		}
		if fi.Mode().Perm()&0o111 != 0o111 {
			t.Errorf("%s has mode %v: not executable by all", b, fi.Mode())
		}
	}
	passwd, _ := os.ReadFile(filepath.Join(root, "etc/passwd"))
	if !strings.Contains(string(passwd), fmt.Sprintf(":%d:%d:", image.UID, image.UID)) {
		t.Errorf("/etc/passwd has no user %d:\n%s", image.UID, passwd)
	}
	if fi, err := os.Stat(filepath.Join(root, "etc/ssl/certs/ca-certificates.crt")); err != nil || fi.Size() == 0 {
		t.Errorf("no CA certificates in the image: %v", err)
	}
	// The entrypoint of the image, from the layer, answers --version with
	// the version the labels carry.
	entry := filepath.Join(root, cf.Config.Entrypoint[0])
	out := run(t, ctx, dir, nil, entry, "--version")
	if want := cf.Config.Labels["org.opencontainers.image.version"]; !strings.Contains(out, want) {
		t.Errorf("tah-node --version in the image says %q; the label says %q", out, want)
	}
	if out := run(t, ctx, dir, nil, filepath.Join(root, "usr/local/bin/tahctl"), "--version"); !strings.HasPrefix(out, "tahctl ") {
		t.Errorf("tahctl --version in the image: %q", out)
	}
	runAsImageUser(t, ctx, root, cf)

	// Reproducible: the same binaries, the same tarball.
	again := buildImage(t, ctx, filepath.Join(dir, "again.tar"))
	if a, b := fileSum(t, path), fileSum(t, again); a != b {
		t.Errorf("two builds of the same binaries differ: %s and %s", a, b)
	}
}

type manifestEntry struct {
	Config   string
	RepoTags []string
	Layers   []string
}

// readManifest reads manifest.json of a docker-archive tarball, checking
// that each file it names is in the archive.
func readManifest(t *testing.T, path string) []manifestEntry {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	names := map[string]bool{}
	var m []manifestEntry
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names[h.Name] = true
		if h.Name == "manifest.json" {
			if err := json.NewDecoder(tr).Decode(&m); err != nil {
				t.Fatalf("manifest.json: %v", err)
			}
		}
	}
	for _, e := range m {
		for _, n := range append([]string{e.Config}, e.Layers...) {
			if !names[n] {
				t.Errorf("manifest.json names %s, which is not in the archive", n)
			}
		}
	}
	return m
}

func checkConfig(t *testing.T, cf *v1.ConfigFile, node string) {
	t.Helper()
	c := cf.Config
	if c.User != "65532:65532" {
		t.Errorf("user %q: want the non-root 65532:65532", c.User)
	}
	if len(c.Entrypoint) != 1 || c.Entrypoint[0] != "/usr/local/bin/tah-node" {
		t.Errorf("entrypoint %q: want /usr/local/bin/tah-node", c.Entrypoint)
	}
	if cf.OS != "linux" || cf.Architecture == "" {
		t.Errorf("platform %s/%s", cf.OS, cf.Architecture)
	}
	v, err := image.ReadVersion(node)
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{
		"org.opencontainers.image.version":  v.Version,
		"org.opencontainers.image.revision": v.Revision,
		"org.opencontainers.image.title":    "tah-node",
	} {
		if got := c.Labels[k]; got != want {
			t.Errorf("label %s = %q, want %q", k, got, want)
		}
	}
	if c.Labels["org.opencontainers.image.created"] != cf.Created.UTC().Format(time.RFC3339) {
		t.Errorf("label created %q and the image's created %v differ", c.Labels["org.opencontainers.image.created"], cf.Created)
	}
	for _, p := range []string{"9464/tcp", "4222/tcp"} {
		if _, ok := c.ExposedPorts[p]; !ok {
			t.Errorf("port %s is not exposed: %v", p, c.ExposedPorts)
		}
	}
}

// extract writes the image's layers into dir, as a runtime would unpack
// them, and returns dir.
func extract(t *testing.T, img v1.Image, dir string) string {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(dir, filepath.Clean("/"+h.Name))
			switch h.Typeflag {
			case tar.TypeDir:
				if err := os.MkdirAll(p, 0o755); err != nil {
					t.Fatal(err)
				}
				os.Chmod(p, os.FileMode(h.Mode).Perm())
			case tar.TypeReg:
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				b, err := io.ReadAll(tr)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, b, os.FileMode(h.Mode).Perm()); err != nil {
					t.Fatal(err)
				}
			default:
				t.Fatalf("%s: entry type %c: the image has files and directories only", h.Name, h.Typeflag)
			}
		}
		rc.Close()
	}
	return dir
}

// runAsImageUser runs the entrypoint inside the unpacked image, as its user,
// with its environment and nothing of this machine's (no shell, no C
// library): what a container runtime does, less the namespaces. It needs
// root (chroot); elsewhere it says so and skips that part.
func runAsImageUser(t *testing.T, ctx context.Context, root string, cf *v1.ConfigFile) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Log("not root: the entrypoint was not run in a chroot of the image")
		return
	}
	// The unpacked directories are this process's; a runtime gives them the
	// layer's owners, and so do we for the one the user writes.
	if err := os.Chown(filepath.Join(root, image.DataDir), image.UID, image.UID); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--userspec=" + cf.Config.User, root}, cf.Config.Entrypoint...)
	args = append(args, "--print-config")
	cmd := exec.CommandContext(ctx, "chroot", args...)
	cmd.Env = cf.Config.Env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("chroot %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	var printed struct {
		DataDir string `json:"data_dir"`
	}
	if err := json.Unmarshal(out, &printed); err != nil || printed.DataDir != image.DataDir {
		t.Errorf("tah-node --print-config in the image: data_dir %q, want %s (%v)\n%s", printed.DataDir, image.DataDir, err, out)
	}
	// --init-trust writes the data directory as the image's user.
	cmd = exec.CommandContext(ctx, "chroot", "--userspec="+cf.Config.User, root, cf.Config.Entrypoint[0], "--init-trust")
	cmd.Env = cf.Config.Env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("tah-node --init-trust as %s in the image: %v\n%s", cf.Config.User, err, out)
	}
	if !fileExists(filepath.Join(root, image.DataDir, "node.creds")) {
		t.Errorf("no node.creds in %s after --init-trust", image.DataDir)
	}
}

func fileSum(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", sha256.Sum256(b))
}
