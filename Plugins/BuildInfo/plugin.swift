import Foundation
import PackagePlugin

/// Generates `BuildInfo.swift` (the git commit the tools were built from,
/// for `--version`) before every build, with Scripts/build-info.sh: /bin/sh
/// and git only, so it works in a fresh clone, and says "unknown" in a
/// tarball without .git. The script rewrites the file only when the commit
/// changed, so an unchanged tree does not rebuild.
@main
struct BuildInfoPlugin: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) throws -> [Command] {
        let output = context.pluginWorkDirectoryURL.appending(path: "generated")
        let script = context.package.directoryURL.appending(path: "Scripts/build-info.sh")
        return [
            .prebuildCommand(displayName: "encfs build info (git commit)",
                             executable: URL(fileURLWithPath: "/bin/sh"),
                             arguments: [script.path, context.package.directoryURL.path, output.path],
                             outputFilesDirectory: output),
        ]
    }
}
