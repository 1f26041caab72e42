package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/tah-dev/tah/deploy/image"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("tah-image", flag.ContinueOnError)
	bins := map[string]string{}
	fs.Func("bin", "NAME=PATH: a static binary to put in "+image.BinDir+" (repeatable; tah-node is the entrypoint)", func(s string) error {
		n, p, ok := strings.Cut(s, "=")
		if !ok || n == "" || p == "" {
			return fmt.Errorf("want NAME=PATH, got %q", s)
		}
		bins[n] = p
		return nil
	})
	out := fs.String("out", "bin/tah-image.tar", "the tarball to write")
	repo := fs.String("repo", "tah-node", "the image's repository name (its tags: REPO:latest, REPO:<version>)")
	ca := fs.String("ca", image.CABundle, "CA bundle (PEM) to put in the image")
	arch := fs.String("arch", runtime.GOARCH, "architecture of the binaries (GOARCH)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	img, err := image.Build(image.Options{Binaries: bins, CACerts: *ca, Arch: *arch})
	if err != nil {
		return err
	}
	v, err := image.ReadVersion(bins[image.Entry])
	if err != nil {
		return err
	}
	tags, err := Tags(*repo, v.Version)
	if err != nil {
		return err
	}
	if err := image.WriteTarball(*out, img, tags); err != nil {
		return fmt.Errorf("write %s: %w", *out, err)
	}
	d, err := img.Digest()
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: %s (%s); docker load -i %s, or podman load -i %s\n", *out, tags[0], d, *out, *out)
	return nil
}

// notInTag is what a tag may not hold ([A-Za-z0-9_.-], 128 at most).
var notInTag = regexp.MustCompile(`[^A-Za-z0-9_.-]`)

// Tags are repo:<version> and repo:latest, checked as references.
func Tags(repo, version string) ([]string, error) {
	v := notInTag.ReplaceAllString(version, "-")
	v = strings.TrimLeft(v, ".-")
	if len(v) > 128 {
		v = v[:128]
	}
	var tags []string
	for _, s := range []string{v, "latest"} {
		if s == "" {
			continue
		}
		if _, err := name.NewTag(repo+":"+s, name.WeakValidation); err != nil {
			return nil, err
		}
		tags = append(tags, repo+":"+s)
	}
	return tags, nil
}
