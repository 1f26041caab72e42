// Package image assembles TAH's container image without a container
// runtime: one layer on an empty base (FROM scratch) with the static
// binaries, a non-root user, CA certificates and the directories a node
// writes, and a configuration whose labels say which build it is. The same
// binaries give the same image, byte for byte: every file's time is the
// build's commit time (or SOURCE_DATE_EPOCH), and nothing else varies.
//
// The smallest use (cmd/tah-image is the command make image runs):
//
//	img, err := image.Build(image.Options{Binaries: map[string]string{"tah-node": "bin/static/tah-node"}})
//	err = tarball.WriteToFile("bin/tah-image.tar", tag, img) // docker load -i, podman load -i
package image

import (
	"archive/tar"
	"bytes"
	"debug/buildinfo"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strconv"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's layout: where the binaries are, who runs them, where a node
// keeps its data and which directory its file tools read.
const (
	BinDir    = "/usr/local/bin"
	DataDir   = "/var/lib/tah"
	WorkDir   = "/workspace"
	UID       = 65532
	User      = "tah"
	HTTPPort  = 9464
	NATSPort  = 4222
	Entry     = "tah-node"
	CABundle  = "/etc/ssl/certs/ca-certificates.crt"
	SourceURL = "github.com/tah-dev/tah"
)

// Options say what goes into the image.
type Options struct {
	// Binaries are the programs by their name in BinDir and the path of each
	// on this machine: static Linux binaries (CGO_ENABLED=0). Entry must be
	// one of them.
	Binaries map[string]string
	// CACerts is the CA bundle (PEM) for the model providers' and OTLP
	// collectors' TLS; empty: CABundle of this machine.
	CACerts string
	// Created is the time of every file and of the image; zero: the
	// SOURCE_DATE_EPOCH variable, else the commit time of Entry's build,
	// else the Unix epoch.
	Created time.Time
	// Arch is the architecture of the binaries (GOARCH); empty: amd64.
	Arch string
}

// Build is the image of o.
func Build(o Options) (v1.Image, error) {
	entry, ok := o.Binaries[Entry]
	if !ok {
		return nil, fmt.Errorf("no %s among the binaries", Entry)
	}
	info, err := ReadVersion(entry)
	if err != nil {
		return nil, err
	}
	created, err := createdAt(o.Created, info)
	if err != nil {
		return nil, err
	}
	ca := o.CACerts
	if ca == "" {
		ca = CABundle
	}
	files, err := contents(o.Binaries, ca)
	if err != nil {
		return nil, err
	}
	layerTar, err := tarOf(files, created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	base := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	arch := o.Arch
	if arch == "" {
		arch = "amd64"
	}
	base, err = mutate.ConfigFile(base, &v1.ConfigFile{
		Architecture: arch,
		OS:           "linux",
		RootFS:       v1.RootFS{Type: "layers"},
		Config:       Config(info, created),
	})
	if err != nil {
		return nil, err
	}
	img, err := mutate.Append(base, mutate.Addendum{
		Layer: layer,
		History: v1.History{
			Created:   v1.Time{Time: created},
			CreatedBy: "tah-image: " + fmt.Sprint(sortedNames(o.Binaries)) + ", a non-root user, CA certificates",
			Comment:   "assembled without a container runtime (deploy/image)",
		},
	})
	if err != nil {
		return nil, err
	}
	return mutate.CreatedAt(img, v1.Time{Time: created})
}

// Config is the runtime configuration: tah-node as the non-root user, its
// data in DataDir, /metrics, /healthz and the web UI on every interface.
func Config(info Version, created time.Time) v1.Config {
	return v1.Config{
		User:       strconv.Itoa(UID) + ":" + strconv.Itoa(UID),
		Entrypoint: []string{path.Join(BinDir, Entry)},
		WorkingDir: WorkDir,
		// TAH_DATA_DIR serves tah-node and tahctl (docker exec ... tahctl
		// status) alike; it reads over a --config file's data_dir.
		Env: []string{"PATH=" + BinDir, "TAH_DATA_DIR=" + DataDir},
		// Not loopback, so that a published port reaches it (the web UI then
		// asks for a login, ui.token); a command given replaces it.
		Cmd: []string{"--http=0.0.0.0:" + strconv.Itoa(HTTPPort)},
		ExposedPorts: map[string]struct{}{
			strconv.Itoa(NATSPort) + "/tcp": {},
			strconv.Itoa(HTTPPort) + "/tcp": {},
		},
		Volumes: map[string]struct{}{DataDir: {}},
		Labels:  Labels(info, created),
	}
}

// Labels are the image's OCI annotations of its build.
func Labels(info Version, created time.Time) map[string]string {
	l := map[string]string{
		"org.opencontainers.image.title":       "tah-node",
		"org.opencontainers.image.description": "TAH: durable LLM agent sessions on NATS JetStream (tah-node, tahctl)",
		"org.opencontainers.image.version":     info.Version,
		"org.opencontainers.image.created":     created.UTC().Format(time.RFC3339),
		"org.opencontainers.image.source":      "https://" + SourceURL,
	}
	if info.Revision != "" {
		l["org.opencontainers.image.revision"] = info.Revision
	}
	return l
}

// Version is what a binary's build recorded: the module version and the VCS
// stamp, as tah-node --version prints them.
type Version struct {
	Version, Revision, Time string
	Modified                bool
}

// ReadVersion reads the build information of the binary at path.
func ReadVersion(path string) (Version, error) {
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return Version{}, fmt.Errorf("%s: %w", path, err)
	}
	v := Version{Version: bi.Main.Version}
	if v.Version == "" {
		v.Version = "(devel)"
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.time":
			v.Time = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v, nil
}

// createdAt is the time the image says it was made: given, or
// SOURCE_DATE_EPOCH (the reproducible-builds convention), or the commit's.
func createdAt(given time.Time, info Version) (time.Time, error) {
	if !given.IsZero() {
		return given.UTC(), nil
	}
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		sec, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q: %w", s, err)
		}
		return time.Unix(sec, 0).UTC(), nil
	}
	if info.Time != "" {
		if t, err := time.Parse(time.RFC3339, info.Time); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Unix(0, 0).UTC(), nil
}

// file is an entry of the layer.
type file struct {
	name string // without the leading /
	mode int64
	uid  int
	dir  bool
	body []byte
}

// contents are the layer's entries: the directories, the user's files, the
// CA bundle and the binaries.
func contents(binaries map[string]string, caPath string) ([]file, error) {
	ca, err := os.ReadFile(caPath)
	if err != nil {
		return nil, fmt.Errorf("CA certificates (the model providers' TLS): %w", err)
	}
	files := []file{
		{name: "etc", mode: 0o755, dir: true},
		{name: "etc/passwd", mode: 0o644, body: []byte("root:x:0:0:root:/root:/sbin/nologin\n" +
			fmt.Sprintf("%s:x:%d:%d:TAH:%s:/sbin/nologin\n", User, UID, UID, DataDir))},
		{name: "etc/group", mode: 0o644, body: []byte(fmt.Sprintf("root:x:0:\n%s:x:%d:\n", User, UID))},
		// Go's resolver reads it: names from /etc/hosts first, then DNS.
		{name: "etc/nsswitch.conf", mode: 0o644, body: []byte("hosts: files dns\n")},
		{name: "etc/ssl", mode: 0o755, dir: true},
		{name: "etc/ssl/certs", mode: 0o755, dir: true},
		{name: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, body: ca},
		{name: "tmp", mode: 0o1777, dir: true},
		{name: "usr", mode: 0o755, dir: true},
		{name: "usr/local", mode: 0o755, dir: true},
		{name: "usr/local/bin", mode: 0o755, dir: true},
		{name: "var", mode: 0o755, dir: true},
		{name: "var/lib", mode: 0o755, dir: true},
		// The node's: a volume mounted here takes its owner (docker, podman).
		{name: "var/lib/tah", mode: 0o700, uid: UID, dir: true},
		{name: "workspace", mode: 0o755, uid: UID, dir: true},
	}
	for _, name := range sortedNames(binaries) {
		b, err := os.ReadFile(binaries[name])
		if err != nil {
			return nil, err
		}
		if !isStaticELF(b) {
			return nil, fmt.Errorf("%s (%s) is not a static ELF binary: build it with CGO_ENABLED=0 GOOS=linux", name, binaries[name])
		}
		files = append(files, file{name: "usr/local/bin/" + name, mode: 0o755, body: b})
	}
	return files, nil
}

// isStaticELF tells an ELF executable without an interpreter (PT_INTERP):
// one that runs on an image without a C library.
func isStaticELF(b []byte) bool {
	if len(b) < 4 || string(b[:4]) != "\x7fELF" {
		return false
	}
	return !bytes.Contains(b[:min(len(b), 4096)], []byte("/lib64/ld-linux")) &&
		!bytes.Contains(b[:min(len(b), 4096)], []byte("/lib/ld-"))
}

func sortedNames(m map[string]string) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// tarOf writes files as a tar whose every header is fixed by the file
// alone and created: the same files give the same bytes.
func tarOf(files []file, created time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{
			Name:    f.name,
			Mode:    f.mode,
			Uid:     f.uid,
			Gid:     f.uid,
			ModTime: created,
		}
		if f.dir {
			h.Typeflag, h.Name = tar.TypeDir, f.name+"/"
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.body); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteTarball writes img as the archive docker save writes and docker load
// and podman load read (manifest.json, the configuration, the compressed
// layers), named by tags in their order: the same image and tags give the
// same bytes.
func WriteTarball(path string, img v1.Image, tags []string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := writeArchive(f, img, tags); err != nil {
		f.Close()
		os.Remove(path)
		return err
	}
	return f.Close()
}

func writeArchive(w io.Writer, img v1.Image, tags []string) error {
	cfgName, err := img.ConfigName()
	if err != nil {
		return err
	}
	cfg, err := img.RawConfigFile()
	if err != nil {
		return err
	}
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	tw := tar.NewWriter(w)
	entry := func(name string, size int64, r io.Reader) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Size: size, Mode: 0o644, Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err := io.Copy(tw, r)
		return err
	}
	if err := entry(cfgName.String(), int64(len(cfg)), bytes.NewReader(cfg)); err != nil {
		return err
	}
	var layerNames []string
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return err
		}
		size, err := l.Size()
		if err != nil {
			return err
		}
		rc, err := l.Compressed()
		if err != nil {
			return err
		}
		name := d.Hex + ".tar.gz"
		err = entry(name, size, rc)
		rc.Close()
		if err != nil {
			return err
		}
		layerNames = append(layerNames, name)
	}
	m, err := json.Marshal([]tarball.Descriptor{{Config: cfgName.String(), RepoTags: tags, Layers: layerNames}})
	if err != nil {
		return err
	}
	if err := entry("manifest.json", int64(len(m)), bytes.NewReader(m)); err != nil {
		return err
	}
	return tw.Close()
}
