import EncFS
#if canImport(Glibc)
import Glibc
#endif

exit(InspectCommand.run(rawArguments()))
