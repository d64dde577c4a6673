export { planOf, planHash, resourceId, jsonPointer, type Plan, type PlanInput, type PlanResource, type ResourcePointer } from "./plan-hash.js";
export {
  MongoApprovalStore,
  approvalIdFor,
  type ApprovalRequestRecord,
  type ApprovalDecisionRecord,
  type ApprovalConsumptionRecord,
  type ApprovalOutcome,
  type ApprovalFailureCode,
} from "./approval-store.js";
export { verifyAndConsume, type ApprovalLedger, type ApprovalPresentation, type ApprovalCheck } from "./verify-and-consume.js";
