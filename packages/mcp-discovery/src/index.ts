export { discoverStdioTools, draftContract, contractName, DiscoveryError, type StdioServer, type DiscoveredTool, type DiscoveryOptions } from "./discover.js";
