// encfs-embed-example: reads an encrypted bundle through the public API of
// the EncFS library alone, the way an application embeds it. No FUSE, no
// mount: the process decrypts what it reads, in memory.
//
//   encfs-embed-example BUNDLE KEYFILE          lists every item of the bundle
//   encfs-embed-example BUNDLE KEYFILE PATH     writes the file at PATH to stdout
//
// Exit status: 0 success, 1 failure (wrong key, damaged bundle, no such
// file…), 2 usage error.
import EncFS
import Foundation

let tool = "encfs-embed-example"

/// Writes `tool: message` to stderr.
func complain(_ message: String) {
    FileHandle.standardError.write(Data("\(tool): \(message)\n".utf8))
}

/// Writes `data` to stdout; a closed pipe ends the program.
func output(_ data: Data) {
    do { try FileHandle.standardOutput.write(contentsOf: data) } catch {
        complain("error: cannot write to standard output: \(error)")
        exit(1)
    }
}

let arguments = CommandLine.arguments.dropFirst()
guard arguments.count == 2 || arguments.count == 3 else {
    complain("usage: \(tool) BUNDLE KEYFILE [PATH]")
    exit(2)
}
let bundlePath = arguments[arguments.startIndex]
let keyFile = arguments[arguments.startIndex + 1]
let itemPath = arguments.count == 3 ? arguments[arguments.startIndex + 2] : nil

do throws(EncryptedBundleError) {
    let bundle = try EncryptedBundle(path: bundlePath, unlock: .keyFile(keyFile))
    if let itemPath {
        // Large files are read in parts: only the chunks a read covers are
        // decrypted, and memory stays at one part.
        let file = try bundle.openFile(atPath: itemPath)
        var offset: UInt64 = 0
        while true {
            let part = try file.read(upToCount: 64 << 10, atOffset: offset)
            if part.isEmpty { break }
            output(part)
            offset += UInt64(part.count)
        }
    } else {
        // One line per item: kind, size, path (and a symlink's target).
        // Byte paths, so that a name that is not UTF-8 is still reached.
        for bytePath in try bundle.subpathsOfDirectory(atBytePath: []) {
            let item = try bundle.attributesOfItem(atBytePath: bytePath)
            let path = String(decoding: bytePath, as: UTF8.self)
            switch item.kind {
            case .directory: print("d \(path)/")
            case .regularFile: print("f \(item.size) \(path)")
            case .symbolicLink: print("l \(path) -> \(item.symbolicLinkTarget ?? "")")
            }
        }
    }
} catch {
    // Every throwing call throws EncryptedBundleError: switch on what the
    // user can act on, describe the rest.
    switch error {
    case .wrongKey(let kinds):
        let names = kinds.map(\.description).joined(separator: ", ")
        complain("error: this key does not open the bundle (it has \(names) slots)")
    case .noSuchFile(let path):
        complain("error: no such file in the bundle: \(String(decoding: path, as: UTF8.self))")
    default:
        complain("error: \(error)")
    }
    exit(1)
}
