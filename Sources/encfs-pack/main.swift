import EncFSCLI
#if canImport(Glibc)
import Glibc
#endif

exit(PackCommand.run(rawArguments()))
