// Command tah-image writes TAH's container image (package image) as a
// tarball that docker load and podman load take, without a container
// runtime: make image runs it on static builds of tah-node, tahctl and
// tah-trust.
//
//	tah-image --bin tah-node=bin/static/tah-node --bin tahctl=bin/static/tahctl \
//	  --out bin/tah-image.tar --repo tah-node
//
// The image is tagged REPO:latest and REPO:<version>, the version being
// tah-node's (its module version, as tah-node --version prints it, with
// what a tag may not hold made '-').
package main
