import CryptCore
import EncFSCore
import EncFSCLI
#if canImport(Glibc)
import Glibc
#endif

// encfs-fuzz is test tooling, not a shipped tool, and unlike the other
// executables it has no main.swift: built with -DFUZZING its entry point is
// libFuzzer's driver, and SwiftPM links an executable's entry as
// `<target>_main`, so this file defines `encfs_fuzz_main` itself (a file
// named main.swift would define it as top-level code). Built normally it is
// the replayer, ``FuzzReplay``.

#if FUZZING

/// libFuzzer's driver, from `-sanitize=fuzzer` (clang_rt.fuzzer_no_main).
@_silgen_name("LLVMFuzzerRunDriver")
func LLVMFuzzerRunDriver(_ argc: UnsafeMutablePointer<Int32>,
                         _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
                         _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32) -> Int32

/// From the sanitizer runtime linked by `-sanitize=address`.
@_silgen_name("__lsan_register_root_region")
func lsanRegisterRootRegion(_ begin: UnsafeRawPointer?, _ size: Int)

/// The target, from `ENCFS_FUZZ_TARGET`, read once.
let selectedTarget: FuzzTarget = {
    guard let name = getenv("ENCFS_FUZZ_TARGET").map({ String(cString: $0) }), let target = FuzzTarget(rawValue: name) else {
        Diagnostics(tool: "encfs-fuzz").error("set ENCFS_FUZZ_TARGET to one of: \(FuzzTarget.allCases.map(\.rawValue).joined(separator: ", "))")
        exit(ExitCode.usage)
    }
    return target
}()

@_cdecl("LLVMFuzzerTestOneInput")
func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    selectedTarget.run(UnsafeRawBufferPointer(start: data, count: data == nil ? 0 : size))
    return 0
}

@_cdecl("encfs_fuzz_main")
func fuzzMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    _ = selectedTarget // refuse a missing target before libFuzzer starts
    FuzzSecrets.prepare()
    // LeakSanitizer does not scan OpenSSL's secure heap (see
    // SecureMemoryStatus.secureHeapRegion): pointers kept there count.
    if let region = SecureMemoryStatus.secureHeapRegion {
        lsanRegisterRootRegion(region.baseAddress, region.count)
    }
    atexit { BundleFuzzing.cleanUp() }
    var count = argc
    var vector = argv
    return LLVMFuzzerRunDriver(&count, &vector, fuzzOneInput)
}

#else

@main
struct FuzzMain {
    static func main() {
        exit(FuzzReplay.run(Array(CommandLine.arguments.dropFirst())))
    }
}

#endif
