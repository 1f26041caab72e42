package bench

import (
	"os"
	"runtime"
	"runtime/pprof"
)

// profilePhase starts a CPU profile of one measured phase into path (none
// when path is empty), with blocking the mutex and block profiles into
// path.mutex and path.block, and returns the function that stops them. A
// diagnostic: a profile that cannot be written is not. The mutex and block
// profiles are asked for apart because recording them costs CPU that the CPU
// profile then shows as the phase's own: 12% of it under row 3's load
// (runtime.saveblockevent and its stack walks).
func profilePhase(path string, blocking bool) (stop func()) {
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return func() {}
	}
	if !blocking {
		return func() {
			pprof.StopCPUProfile()
			f.Close()
		}
	}
	runtime.SetMutexProfileFraction(10)
	runtime.SetBlockProfileRate(100000)
	return func() {
		pprof.StopCPUProfile()
		f.Close()
		for _, name := range []string{"mutex", "block"} {
			if g, err := os.Create(path + "." + name); err == nil {
				pprof.Lookup(name).WriteTo(g, 0)
				g.Close()
			}
		}
		runtime.SetMutexProfileFraction(0)
		runtime.SetBlockProfileRate(0)
	}
}
